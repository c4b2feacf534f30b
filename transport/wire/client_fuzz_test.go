package wire

import "testing"

// Fuzz targets of the client protocol's decoders: the same four properties
// as the links' (checkDecode), on each message of the client port.

func FuzzDecodeClientHello(f *testing.F) {
	fuzzTarget(f, "FuzzDecodeClientHello", bodySeeds(TypeClientHello), decodeBodyOf(TypeClientHello))
}

func FuzzDecodeClientWelcome(f *testing.F) {
	fuzzTarget(f, "FuzzDecodeClientWelcome", bodySeeds(TypeClientWelcome), decodeBodyOf(TypeClientWelcome))
}

func FuzzDecodeClientKeepAlive(f *testing.F) {
	fuzzTarget(f, "FuzzDecodeClientKeepAlive", bodySeeds(TypeClientKeepAlive), decodeBodyOf(TypeClientKeepAlive))
}

func FuzzDecodeClientAlive(f *testing.F) {
	fuzzTarget(f, "FuzzDecodeClientAlive", bodySeeds(TypeClientAlive), decodeBodyOf(TypeClientAlive))
}

func FuzzDecodeClientLock(f *testing.F) {
	fuzzTarget(f, "FuzzDecodeClientLock", bodySeeds(TypeClientLock), decodeBodyOf(TypeClientLock))
}

func FuzzDecodeClientConvert(f *testing.F) {
	fuzzTarget(f, "FuzzDecodeClientConvert", bodySeeds(TypeClientConvert), decodeBodyOf(TypeClientConvert))
}

func FuzzDecodeClientUnlock(f *testing.F) {
	fuzzTarget(f, "FuzzDecodeClientUnlock", bodySeeds(TypeClientUnlock), decodeBodyOf(TypeClientUnlock))
}

func FuzzDecodeClientCancel(f *testing.F) {
	fuzzTarget(f, "FuzzDecodeClientCancel", bodySeeds(TypeClientCancel), decodeBodyOf(TypeClientCancel))
}

func FuzzDecodeClientGrant(f *testing.F) {
	fuzzTarget(f, "FuzzDecodeClientGrant", bodySeeds(TypeClientGrant), decodeBodyOf(TypeClientGrant))
}

func FuzzDecodeClientValue(f *testing.F) {
	fuzzTarget(f, "FuzzDecodeClientValue", bodySeeds(TypeClientValue), decodeBodyOf(TypeClientValue))
}

func FuzzDecodeClientSetValue(f *testing.F) {
	fuzzTarget(f, "FuzzDecodeClientSetValue", bodySeeds(TypeClientSetValue), decodeBodyOf(TypeClientSetValue))
}

func FuzzDecodeClientDescribe(f *testing.F) {
	fuzzTarget(f, "FuzzDecodeClientDescribe", bodySeeds(TypeClientDescribe), decodeBodyOf(TypeClientDescribe))
}

func FuzzDecodeClientResource(f *testing.F) {
	fuzzTarget(f, "FuzzDecodeClientResource", bodySeeds(TypeClientResource), decodeBodyOf(TypeClientResource))
}

func FuzzDecodeClientOK(f *testing.F) {
	fuzzTarget(f, "FuzzDecodeClientOK", bodySeeds(TypeClientOK), decodeBodyOf(TypeClientOK))
}

func FuzzDecodeClientError(f *testing.F) {
	fuzzTarget(f, "FuzzDecodeClientError", bodySeeds(TypeClientError), decodeBodyOf(TypeClientError))
}

func FuzzDecodeClientBlocking(f *testing.F) {
	fuzzTarget(f, "FuzzDecodeClientBlocking", bodySeeds(TypeClientBlocking), decodeBodyOf(TypeClientBlocking))
}

func FuzzDecodeClientLost(f *testing.F) {
	fuzzTarget(f, "FuzzDecodeClientLost", bodySeeds(TypeClientLost), decodeBodyOf(TypeClientLost))
}

func FuzzDecodeClientBye(f *testing.F) {
	fuzzTarget(f, "FuzzDecodeClientBye", bodySeeds(TypeClientBye), decodeBodyOf(TypeClientBye))
}

func FuzzDecodeClientAcquire(f *testing.F) {
	fuzzTarget(f, "FuzzDecodeClientAcquire", bodySeeds(TypeClientAcquire), decodeBodyOf(TypeClientAcquire))
}

func FuzzDecodeClientAck(f *testing.F) {
	fuzzTarget(f, "FuzzDecodeClientAck", bodySeeds(TypeClientAck), decodeBodyOf(TypeClientAck))
}
