package pinned

// ResetSelections forgets Select's cache, so a test can select again.
var ResetSelections = resetSelections
