// Command bench reproduces the classic PyTorch DataLoader tables with
// tensorbatch, side by side with PyTorch's own DataLoader on the same
// machine when python3-torch is installed: workers vs throughput and GPU
// utilisation, persistent vs per-epoch workers across start methods, time
// to first batch, peak RSS, bytes copied per batch, engine efficiency and,
// with a GPU backend, host-to-device bandwidth. Image rows: real JPEGs per
// core against TurboJPEG, PIL and torchvision, loaders against
// DataLoader + ImageFolder, the same images from tar and Parquet shards on
// disk and from S3 (versitygw) against the folder and against PyTorch
// reading the tars, and a high-resolution set per core.
//
//	go run ./bench            # the full run (make bench)
//	go run ./bench -quick     # a small run for CI (make bench-quick)
//	go run ./bench -peer=off  # tensorbatch only
//
// Results go to stdout as markdown and to -out as CSV, JSON, PNG and SVG.
package main
