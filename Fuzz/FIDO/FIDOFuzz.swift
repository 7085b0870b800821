import FIDOProtocol

// libFuzzer targets over FIDO2's wire (`make fuzz`): CTAP's CBOR decoder, the CTAPHID assembler and U2F's command
// APDUs. Any bytes must decode or be refused, never crash.

/// Decodes; what decodes re-encodes canonically, and the canonical bytes decode to an item that encodes to them
/// again.
func cborFuzz(_ bytes: [UInt8]) {
    guard let item = try? CBOR(decoding: bytes) else { return }
    let canonical = item.encoded()
    guard let again = try? CBOR(decoding: canonical) else { preconditionFailure("a canonical encoding is refused") }
    precondition(again.encoded() == canonical, "the canonical encoding is not stable")
}

/// Feeds the bytes as 64-byte reports, each a second after the last; every message that comes out fits CTAPHID
/// and comes out the same when cut into reports and put back together.
func ctaphidFuzz(_ bytes: [UInt8]) {
    var assembler = CTAPHIDAssembler(transactionTimeout: 3)
    var time = 0.0
    var offset = 0
    while offset < bytes.count {
        let report = Array(bytes[offset..<min(offset + CTAPHID.reportSize, bytes.count)])
        offset += CTAPHID.reportSize
        time += 1
        guard case .message(let message) = assembler.receive(report, at: time) else { continue }
        precondition(message.payload.count <= CTAPHID.maximumMessage, "a message longer than CTAPHID carries")
        var again = CTAPHIDAssembler()
        let outcomes = message.packets().map { again.receive($0, at: 0) }
        precondition(outcomes.last == .message(message), "a message does not survive its own framing")
    }
}

/// Parses the bytes as a U2F command APDU; what parses comes out the same from its own extended encoding.
func u2fFuzz(_ bytes: [UInt8]) {
    guard let command = try? U2F.Command(bytes), command.data.count <= 0xFFFF else { return }
    guard let again = try? U2F.Command(command.encoded) else {
        preconditionFailure("an APDU's own encoding is refused")
    }
    precondition(again == command, "an APDU does not survive its own encoding")
}
