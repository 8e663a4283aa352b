// protoc plugins pinned to the protobuf runtime that fedpca's go.mod uses.
// Run with `go tool -modfile=tools/protoc/go.mod <plugin>`.
module github.com/fedpca/fedpca/tools/protoc

go 1.26

tool (
	google.golang.org/grpc/cmd/protoc-gen-go-grpc
	google.golang.org/protobuf/cmd/protoc-gen-go
)

require (
	google.golang.org/grpc/cmd/protoc-gen-go-grpc v1.6.2 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)
