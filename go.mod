module github.com/anp2net/relay

go 1.26.8

require (
	github.com/fxamacker/cbor/v2 v2.9.6
	github.com/gowebpki/jcs v1.0.2
)

require github.com/x448/float16 v0.8.4 // indirect
