// Package launchtest proves, under real launchers, that every process of
// a distributed job gets its own part of each epoch: its tests start a
// test binary 4 times with torchrun (torch.distributed.run), Open MPI's
// mpirun and Slurm-style variables, and check the sample ids each rank
// saw, for a map-style dataset and for a stream of WebDataset shards. It
// has no code of its own: see launch_test.go and docs/distributed.md.
package launchtest
