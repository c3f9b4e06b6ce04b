// Package recycle lets a decode function tell the shard reader that
// called it that it kept none of a record's bytes past its return, so
// that the reader may read later records into them (shards.Source.Decode).
// A decode function that says nothing keeps the bytes, which are then the
// garbage collector's, as any Go value: a user's DecodeFunc may hold on
// to a record's fields without copying them.
package recycle

import "context"

// Context is the context of one decode: the caller's, and whether the
// decode function released the record's bytes.
type Context struct {
	context.Context
	released bool
}

type key struct{}

// Value returns c for this package's key, else the caller's value.
func (c *Context) Value(k any) any {
	if k == (key{}) {
		return c
	}
	return c.Context.Value(k)
}

// Released reports whether the decode function called Release with c (or
// a context made from it).
func (c *Context) Released() bool { return c.released }

// Release tells the reader whose Context ctx carries, if any, that the
// decode function keeps none of the record's bytes once it returns. Only
// a function that knows what its whole decode keeps may call it:
// vision.Pipeline.Record's, whose bytes go to the decoder and no further.
func Release(ctx context.Context) {
	if c, ok := ctx.Value(key{}).(*Context); ok {
		c.released = true
	}
}
