import Foundation
import SecurityProtocol

// A libFuzzer target over what localauthd reads from a connection (`make fuzz`): any bytes must decode as a
// ClientMessage frame or be refused with a MessageDecodingError, never crash or allocate past the limits, and a
// decoded message must encode back to exactly the bytes it came from (one encoding per value). The same for the
// ServerMessage frames a client reads.

func protocolFrameFuzz(_ bytes: [UInt8]) {
    if let message = try? ClientMessage(decoding: bytes) {
        precondition(Array(message.encoded().unprotectedData()) == bytes, "a client frame re-encodes differently")
    }
    if let message = try? ServerMessage(decoding: bytes) {
        precondition(Array(message.encoded().unprotectedData()) == bytes, "a server frame re-encodes differently")
    }
}
