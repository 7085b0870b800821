import Foundation
import SecurityProtocol
import SecurityTransport

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

// The lane's socket reading (`FrameReader`, localauthd's `LaneServer` reading the hello): any bytes arriving
// on a socket are cut into frames of at most the limit, each decoded or refused; the reader never hands out more
// bytes than arrived, and stops at the first malformed header.
func laneFrameFuzz(_ bytes: [UInt8]) {
    var pair: [Int32] = [0, 0]
    precondition(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0, "no socketpair")
    defer {
        close(pair[0])
        close(pair[1])
    }
    // The socket's buffer holds the whole input (libFuzzer runs this target with -max_len=8192).
    let written = bytes.withUnsafeBytes { send(pair[1], $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    precondition(written == bytes.count, "the input did not fit the socket's buffer")
    shutdown(pair[1], Int32(SHUT_WR))
    let frames = FrameReader(descriptor: pair[0], limit: 4096, version: MessageWriter.formatVersion)
    var handed = 0
    while true {
        guard
            let count = try? frames.next({ frame -> Int in
                _ = try? ClientMessage(decoding: frame)
                return frame.byteCount
            })
        else { break }
        handed += count
        precondition(handed <= bytes.count, "the reader handed out more bytes than arrived")
    }
}
