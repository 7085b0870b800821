import FIDOProtocol
import Testing

/// CTAPHID's framing (CTAP 2.1 §11.2): messages cut into 64-byte reports and put back together, one transaction
/// at a time, with the errors the specification gives for busy channels, bad sequences, bad lengths and timeouts.
@Suite("FIDO: CTAPHID framing")
struct CTAPHIDTests {
    let channel: UInt32 = 0x0102_0304

    /// Lengths at each packet boundary survive the round trip; the largest message takes 129 packets.
    @Test func messagesOfEveryBoundaryLengthRoundTrip() {
        for length in [0, 1, 57, 58, 116, 117, 1000, CTAPHID.maximumMessage] {
            let payload = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 31) }
            let message = CTAPHID.Message(channel: channel, command: .cbor, payload: payload)
            let packets = message.packets()
            #expect(packets.allSatisfy { $0.count == CTAPHID.reportSize })
            #expect(packets.count == (length <= 57 ? 1 : 1 + (length - 57 + 58) / 59), "\(length)")
            var assembler = CTAPHIDAssembler()
            var outcomes = packets.map { assembler.receive($0, at: 0) }
            #expect(outcomes.removeLast() == .message(message), "\(length)")
            #expect(outcomes.allSatisfy { $0 == .pending })
        }
        let largest = CTAPHID.Message(channel: channel, command: .cbor, payload: .init(repeating: 7, count: 7609))
        #expect(largest.packets().count == 129)
    }

    /// The first packet's layout: channel, command with the high bit, length big-endian, then data.
    @Test func theInitializationPacketIsLaidOutAsTheSpecificationSays() {
        let packet = CTAPHID.Message(channel: 0xCAFE_F00D, command: .ping, payload: [9, 8, 7]).packets()[0]
        #expect(Array(packet.prefix(10)) == [0xCA, 0xFE, 0xF0, 0x0D, 0x81, 0x00, 0x03, 9, 8, 7])
        #expect(packet[10...].allSatisfy { $0 == 0 })
        #expect(CTAPHID.channel(of: packet) == 0xCAFE_F00D)
    }

    /// A second channel that starts a message while one is being assembled is told the channel is busy, and the
    /// first message completes undisturbed.
    @Test func anotherChannelIsBusyWhileAMessageIsAssembled() {
        let first = CTAPHID.Message(channel: channel, command: .cbor, payload: .init(repeating: 1, count: 100))
        let other = CTAPHID.Message(channel: 0x0A0B_0C0D, command: .ping, payload: [1])
        var assembler = CTAPHIDAssembler()
        let packets = first.packets()
        #expect(assembler.receive(packets[0], at: 0) == .pending)
        #expect(assembler.receive(other.packets()[0], at: 0) == .error(.channelBusy, channel: 0x0A0B_0C0D))
        #expect(assembler.receive(packets[1], at: 0) == .message(first))
        #expect(assembler.receive(other.packets()[0], at: 0) == .message(other))
    }

    /// A continuation out of order ends the message with ERR_INVALID_SEQ; one on another channel is ignored.
    @Test func aContinuationOutOfSequenceEndsTheMessage() {
        let message = CTAPHID.Message(channel: channel, command: .cbor, payload: .init(repeating: 2, count: 200))
        var packets = message.packets()
        var assembler = CTAPHIDAssembler()
        #expect(assembler.receive(packets[0], at: 0) == .pending)
        var stray = packets[1]
        stray[3] ^= 0xFF
        #expect(assembler.receive(stray, at: 0) == .pending, "another channel's continuation is ignored")
        packets[2][4] = 5
        #expect(assembler.receive(packets[2], at: 0) == .error(.invalidSequence, channel: channel))
        #expect(assembler.assemblingChannel == nil)
    }

    /// An INIT on the assembling channel abandons the message and is itself delivered; another command there is
    /// out of sequence.
    @Test func initResynchronizesTheAssemblingChannel() {
        let long = CTAPHID.Message(channel: channel, command: .cbor, payload: .init(repeating: 3, count: 100))
        let initialize = CTAPHID.Message(channel: channel, command: .initialize, payload: [1, 2, 3, 4, 5, 6, 7, 8])
        var assembler = CTAPHIDAssembler()
        #expect(assembler.receive(long.packets()[0], at: 0) == .pending)
        #expect(assembler.receive(initialize.packets()[0], at: 0) == .message(initialize))
        #expect(assembler.receive(long.packets()[0], at: 0) == .pending)
        let ping = CTAPHID.Message(channel: channel, command: .ping, payload: [1])
        #expect(assembler.receive(ping.packets()[0], at: 0) == .error(.invalidSequence, channel: channel))
    }

    /// A length beyond 7609 bytes and channel 0 are refused at once; a report of another size is not this
    /// transport's and is ignored.
    @Test func badLengthsAndChannelsAreRefused() {
        var oversize = CTAPHID.Message(channel: channel, command: .cbor, payload: []).packets()[0]
        oversize[5] = 0x1D
        oversize[6] = 0xBA  // 7610
        var assembler = CTAPHIDAssembler()
        #expect(assembler.receive(oversize, at: 0) == .error(.invalidLength, channel: channel))
        let zero = CTAPHID.Message(channel: 0, command: .ping, payload: []).packets()[0]
        #expect(assembler.receive(zero, at: 0) == .error(.invalidChannel, channel: 0))
        #expect(assembler.receive([0xFF, 0xFF, 0xFF, 0xFF, 0x86], at: 0) == .pending)
    }

    /// A message whose continuation packets do not come within the transaction timeout is dropped: expire names
    /// its channel, and another channel is then served.
    @Test func anUnfinishedMessageTimesOut() {
        let message = CTAPHID.Message(channel: channel, command: .cbor, payload: .init(repeating: 4, count: 100))
        var assembler = CTAPHIDAssembler(transactionTimeout: 3)
        #expect(assembler.receive(message.packets()[0], at: 10) == .pending)
        #expect(assembler.expire(at: 12.9) == nil)
        #expect(assembler.expire(at: 13) == channel)
        #expect(assembler.receive(message.packets()[1], at: 13) == .pending, "the rest of a dropped message")
        let other = CTAPHID.Message(channel: 0x0A0B_0C0D, command: .ping, payload: [1])
        #expect(assembler.receive(message.packets()[0], at: 20) == .pending)
        #expect(assembler.receive(other.packets()[0], at: 23.5) == .message(other), "the stale message holds nothing")
    }
}
