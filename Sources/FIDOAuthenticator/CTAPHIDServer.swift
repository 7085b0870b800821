import FIDOProtocol
import Foundation

/// The device side of CTAPHID (CTAP 2.1 §11.2) over any transport that carries 64-byte reports to and from peers
/// (a UDP sender, a uhid device): channels handed out by `INIT`, `PING`, `WINK`, `CBOR` answered by the
/// authenticator with `KEEPALIVE` every 100 ms while it waits for the user, `MSG` (U2F, whose requests do not wait
/// for the user: they are asked again until the user was there), `CANCEL`, and the framing errors of
/// ``CTAPHIDAssembler``. One `CBOR` or `MSG` request runs at a time; another channel that asks meanwhile is told
/// `ERR_CHANNEL_BUSY`. A channel answers only the peer that opened it.
public actor CTAPHIDServer<Peer: Hashable & Sendable> {
    /// Sends one report to a peer.
    public typealias Send = @Sendable (_ report: [UInt8], _ peer: Peer) -> Void

    // Computed: a generic type has no static stored properties.
    /// The firmware version `INIT` reports.
    static var version: (major: UInt8, minor: UInt8, build: UInt8) { (1, 0, 0) }
    /// How many channels are kept; the oldest goes when a new one would pass this.
    static var maximumChannels: Int { 64 }

    private let authenticator: FIDOAuthenticator
    private let send: Send
    private var assembler = CTAPHIDAssembler()
    private var channels: [UInt32: Peer] = [:]
    private var channelOrder: [UInt32] = []
    /// The `CBOR` request in progress: its number, its channel and its task.
    private var running: (number: UInt64, channel: UInt32, task: Task<Void, Never>)?
    private var requests: UInt64 = 0
    private let start = ContinuousClock.now

    /// A server for `authenticator`, whose reports go out through `send`.
    public init(authenticator: FIDOAuthenticator, send: @escaping Send) {
        self.authenticator = authenticator
        self.send = send
    }

    /// Seconds since the server started, the assembler's clock.
    private var now: Double {
        let elapsed = ContinuousClock.now - start
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }

    /// Takes one report from `peer`.
    public func receive(_ report: [UInt8], from peer: Peer) {
        expireStaleMessage()
        let channel = CTAPHID.channel(of: report)
        // A channel is its opener's: another peer's reports on it are dropped unanswered.
        if let channel, let owner = channels[channel], owner != peer { return }
        switch assembler.receive(report, at: now) {
        case .pending: break
        case .error(let code, let channel): reply(.error(code, channel: channel), to: peer)
        case .message(let message): handle(message, from: peer)
        }
    }

    /// Answers `ERR_MSG_TIMEOUT` for a message whose packets stopped coming; the transport calls this now and
    /// then (every report does too).
    public func expireStaleMessage() {
        guard let channel = assembler.expire(at: now), let peer = channels[channel] else { return }
        reply(.error(.messageTimeout, channel: channel), to: peer)
    }

    private func handle(_ message: CTAPHID.Message, from peer: Peer) {
        let channel = message.channel
        if message.command == CTAPHID.Command.initialize.rawValue {
            guard message.payload.count == 8 else { return reply(.error(.invalidLength, channel: channel), to: peer) }
            guard channel == CTAPHID.broadcastChannel || channels[channel] != nil else {
                return reply(.error(.invalidChannel, channel: channel), to: peer)
            }
            let assigned = channel == CTAPHID.broadcastChannel ? newChannel(for: peer) : channel
            // Resynchronization abandons the channel's request: its answer is never sent.
            if let running, running.channel == assigned {
                running.task.cancel()
                self.running = nil
            }
            let version = Self.version
            let payload =
                message.payload + CTAPHID.channelBytes(assigned)
                + [
                    2, version.major, version.minor, version.build,
                    (CTAPHID.Capabilities.cbor.union(.wink)).rawValue,
                ]
            return reply(CTAPHID.Message(channel: channel, command: .initialize, payload: payload), to: peer)
        }
        guard channel != CTAPHID.broadcastChannel, channels[channel] != nil else {
            return reply(.error(.invalidChannel, channel: channel), to: peer)
        }
        switch CTAPHID.Command(rawValue: message.command) {
        case .ping: reply(message, to: peer)
        case .wink: reply(CTAPHID.Message(channel: channel, command: .wink, payload: []), to: peer)
        case .cancel:
            // No answer to CANCEL itself; the request it cancels answers CTAP2_ERR_KEEPALIVE_CANCEL.
            if let running, running.channel == channel { running.task.cancel() }
        case .cbor, .msg:
            guard running == nil else { return reply(.error(.channelBusy, channel: channel), to: peer) }
            guard !message.payload.isEmpty else { return reply(.error(.invalidLength, channel: channel), to: peer) }
            startRequest(message, peer: peer)
        default: reply(.error(.invalidCommand, channel: channel), to: peer)
        }
    }

    /// Runs one CBOR request on its own task, sending KEEPALIVE every 100 ms until its answer goes out. A cancelled
    /// request (CANCEL) still answers what the authenticator answered: `CTAP2_ERR_KEEPALIVE_CANCEL` when the approval
    /// was cancelled, or its result when the user had already approved.
    private func startRequest(_ message: CTAPHID.Message, peer: Peer) {
        let (channel, request, isU2F) = (
            message.channel, message.payload, message.command == CTAPHID.Command.msg.rawValue
        )
        let authenticator = self.authenticator
        requests += 1
        let number = requests
        let task = Task {
            let keepalive = Task {
                while !Task.isCancelled {
                    try? await Task.sleep(for: .milliseconds(100))
                    guard !Task.isCancelled else { break }
                    self.keepalive(channel: channel, peer: peer, waitingForUser: !isU2F)
                }
            }
            let answer =
                isU2F
                ? await authenticator.respondU2F(to: request, session: UInt64(channel))
                : await authenticator.respond(to: request, session: UInt64(channel))
            keepalive.cancel()
            self.finish(number, channel: channel, peer: peer, answer: answer, command: isU2F ? .msg : .cbor)
        }
        running = (number, channel, task)
    }

    private func keepalive(channel: UInt32, peer: Peer, waitingForUser: Bool) {
        guard let running, running.channel == channel else { return }
        let status = (waitingForUser ? CTAPHID.KeepaliveStatus.userPresenceNeeded : .processing).rawValue
        reply(CTAPHID.Message(channel: channel, command: .keepalive, payload: [status]), to: peer)
    }

    private func finish(_ number: UInt64, channel: UInt32, peer: Peer, answer: [UInt8], command: CTAPHID.Command) {
        guard let running, running.number == number else { return }
        self.running = nil
        // An answer CTAPHID cannot carry (names are cut to fit, so none should come) is an error, not a crash.
        guard answer.count <= CTAPHID.maximumMessage else { return reply(.error(.other, channel: channel), to: peer) }
        reply(CTAPHID.Message(channel: channel, command: command, payload: answer), to: peer)
    }

    /// A new random channel for `peer`; the oldest is forgotten past ``maximumChannels``.
    private func newChannel(for peer: Peer) -> UInt32 {
        var channel: UInt32
        repeat { channel = UInt32.random(in: 1..<CTAPHID.broadcastChannel) } while channels[channel] != nil
        channels[channel] = peer
        channelOrder.append(channel)
        if channelOrder.count > Self.maximumChannels { channels[channelOrder.removeFirst()] = nil }
        return channel
    }

    private func reply(_ message: CTAPHID.Message, to peer: Peer) {
        for packet in message.packets() { send(packet, peer) }
    }
}
