import FIDOAuthenticator
import FIDOProtocol
import Synchronization
import Testing

/// The device side of CTAPHID, fed reports as a transport would, with no keychain touched (GetInfo only).
@Suite("FIDO: the CTAPHID server")
struct CTAPHIDServerTests {
    /// What the server sent, in order, with the peer each report went to: to take at once, or to await.
    final class Sent: Sendable {
        let reports = Mutex<[(report: [UInt8], peer: String)]>([])
        let stream: AsyncStream<(report: [UInt8], peer: String)>
        let continuation: AsyncStream<(report: [UInt8], peer: String)>.Continuation

        init() { (stream, continuation) = AsyncStream.makeStream() }

        /// The first CBOR answer to `peer` that comes (KEEPALIVEs and earlier answers are passed over); nil when
        /// none comes within 10 minutes. The answer comes from a task of the server's, which a busy machine's
        /// cooperative pool may hold up for a long while: this waits for the event, not for a time.
        func cborAnswer(to peer: String) async -> CTAPHID.Message? {
            let waiter = Task { () -> CTAPHID.Message? in
                var assembler = CTAPHIDAssembler()
                for await sent in stream where sent.peer == peer {
                    if case .message(let message) = assembler.receive(sent.report, at: 0),
                        message.command == CTAPHID.Command.cbor.rawValue
                    {
                        return message
                    }
                }
                return nil
            }
            let timer = Task {
                try? await Task.sleep(for: .seconds(600))
                waiter.cancel()
            }
            defer { timer.cancel() }
            return await waiter.value
        }
        func take() -> [(report: [UInt8], peer: String)] {
            reports.withLock { reports in
                defer { reports = [] }
                return reports
            }
        }
    }

    func server() -> (CTAPHIDServer<String>, Sent) {
        let sent = Sent()
        let server = CTAPHIDServer<String>(authenticator: FIDOAuthenticator()) { report, peer in
            sent.reports.withLock { $0.append((report, peer)) }
            sent.continuation.yield((report, peer))
        }
        return (server, sent)
    }

    /// Opens a channel for `peer` with INIT on the broadcast channel; the channel.
    func open(_ server: CTAPHIDServer<String>, _ sent: Sent, peer: String) async throws -> UInt32 {
        let nonce: [UInt8] = [1, 2, 3, 4, 5, 6, 7, 8]
        let request = CTAPHID.Message(channel: CTAPHID.broadcastChannel, command: .initialize, payload: nonce)
        for packet in request.packets() { await server.receive(packet, from: peer) }
        let answer = try #require(sent.take().first)
        #expect(answer.peer == peer)
        var assembler = CTAPHIDAssembler()
        guard case .message(let message) = assembler.receive(answer.report, at: 0) else {
            Issue.record("no INIT answer")
            return 0
        }
        #expect(message.channel == CTAPHID.broadcastChannel && message.command == CTAPHID.Command.initialize.rawValue)
        #expect(Array(message.payload.prefix(8)) == nonce && message.payload.count == 17)
        #expect(message.payload[12] == 2, "CTAPHID protocol version 2")
        #expect(message.payload[16] == 0x05, "capabilities: WINK, CBOR, and MSG (NMSG clear)")
        return CTAPHID.channel(of: Array(message.payload[8..<12]))!
    }

    /// INIT hands out a channel; PING echoes on it; GetInfo answers over CBOR; each answer goes to its peer.
    @Test func initPingAndGetInfo() async throws {
        let (server, sent) = server()
        let channel = try await open(server, sent, peer: "a")
        let ping = CTAPHID.Message(channel: channel, command: .ping, payload: Array(0..<100))
        for packet in ping.packets() { await server.receive(packet, from: "a") }
        var assembler = CTAPHIDAssembler()
        let echoed = sent.take().map { assembler.receive($0.report, at: 0) }.last
        #expect(echoed == .message(ping))

        let getInfo = CTAPHID.Message(channel: channel, command: .cbor, payload: [CTAP2.Command.getInfo.rawValue])
        for packet in getInfo.packets() { await server.receive(packet, from: "a") }
        guard let answer = await sent.cborAnswer(to: "a") else {
            Issue.record("no GetInfo answer within 10 minutes")
            return
        }
        #expect(answer.payload.first == CTAP2.Status.ok.rawValue)
        let info = try CBOR(decoding: Array(answer.payload.dropFirst()))
        #expect(info[1] == .array([.text("U2F_V2"), .text("FIDO_2_0"), .text("FIDO_2_1_PRE")]))
    }

    /// A channel answers only the peer that opened it: another peer's reports on it are dropped, and a channel
    /// nobody opened is refused.
    @Test func aChannelIsItsOpenersOnly() async throws {
        let (server, sent) = server()
        let channel = try await open(server, sent, peer: "a")
        let ping = CTAPHID.Message(channel: channel, command: .ping, payload: [42])
        for packet in ping.packets() { await server.receive(packet, from: "b") }
        #expect(sent.take().isEmpty, "another peer's ping on a's channel is not answered")
        let stray = CTAPHID.Message(channel: 0x1234_5678, command: .ping, payload: [42])
        for packet in stray.packets() { await server.receive(packet, from: "b") }
        var assembler = CTAPHIDAssembler()
        let refused = sent.take().map { assembler.receive($0.report, at: 0) }.last
        #expect(refused == .message(.error(.invalidChannel, channel: 0x1234_5678)))
    }
}
