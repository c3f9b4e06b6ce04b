package shards

// The object stores the tests read, registered as a program that reads
// them registers them: by importing their packages.
import (
	_ "github.com/tensorbatch/tensorbatch/shards/azure"
	_ "github.com/tensorbatch/tensorbatch/shards/gcs"
	_ "github.com/tensorbatch/tensorbatch/shards/s3"
)
