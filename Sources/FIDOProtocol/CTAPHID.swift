/// CTAPHID (CTAP 2.1 §11.2): messages cut into 64-byte reports. An initialization packet carries the channel
/// (4 bytes), the command with its high bit set, the message length (2 bytes, big-endian) and the first 57 bytes; each
/// continuation packet carries the channel, a sequence number (0–127) and 59 more bytes. A message is at most
/// 57 + 128 × 59 = 7609 bytes.
package enum CTAPHID {
    /// The size of every report, in and out.
    package static let reportSize = 64
    /// The largest message the framing can carry.
    package static let maximumMessage = 57 + 128 * 59
    /// The channel every client starts on, to ask for one of its own (`INIT`).
    package static let broadcastChannel: UInt32 = 0xFFFF_FFFF

    /// The commands (their codes without the initialization packet's high bit).
    package enum Command: UInt8, Sendable {
        case ping = 0x01
        case msg = 0x03
        case lock = 0x04
        case initialize = 0x06
        case wink = 0x08
        case cbor = 0x10
        case cancel = 0x11
        case keepalive = 0x3B
        case error = 0x3F
    }

    /// The errors `CTAPHID_ERROR` carries.
    package enum ErrorCode: UInt8, Sendable {
        case invalidCommand = 0x01
        case invalidParameter = 0x02
        case invalidLength = 0x03
        case invalidSequence = 0x04
        case messageTimeout = 0x05
        case channelBusy = 0x06
        case lockRequired = 0x0A
        case invalidChannel = 0x0B
        case other = 0x7F
    }

    /// `CTAPHID_KEEPALIVE`'s status: still working, or waiting for the user's presence.
    package enum KeepaliveStatus: UInt8, Sendable {
        case processing = 1
        case userPresenceNeeded = 2
    }

    /// `INIT`'s capability flags.
    package struct Capabilities: OptionSet, Sendable {
        package let rawValue: UInt8
        package init(rawValue: UInt8) { self.rawValue = rawValue }
        package static let wink = Capabilities(rawValue: 0x01)
        package static let cbor = Capabilities(rawValue: 0x04)
        /// No `CTAPHID_MSG` (no CTAP1/U2F).
        package static let noMessage = Capabilities(rawValue: 0x08)
    }

    /// One whole message on a channel: a command and its data.
    package struct Message: Equatable, Sendable {
        package var channel: UInt32
        /// The command byte without the high bit (a ``Command`` raw value, or an unknown one a client sent).
        package var command: UInt8
        package var payload: [UInt8]

        package init(channel: UInt32, command: UInt8, payload: [UInt8]) {
            self.channel = channel
            self.command = command
            self.payload = payload
        }

        package init(channel: UInt32, command: Command, payload: [UInt8]) {
            self.init(channel: channel, command: command.rawValue, payload: payload)
        }

        /// An error answer on `channel`.
        package static func error(_ code: ErrorCode, channel: UInt32) -> Message {
            Message(channel: channel, command: .error, payload: [code.rawValue])
        }

        /// The message cut into reports, each ``CTAPHID/reportSize`` bytes, zero-padded. The payload must fit
        /// (``CTAPHID/maximumMessage``).
        package func packets() -> [[UInt8]] {
            precondition(payload.count <= CTAPHID.maximumMessage, "a CTAPHID message is at most 7609 bytes")
            let header = CTAPHID.channelBytes(channel)
            var first = header + [command | 0x80, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
            first += payload.prefix(57)
            var packets = [CTAPHID.padded(first)]
            var offset = min(57, payload.count)
            var sequence: UInt8 = 0
            while offset < payload.count {
                let end = min(offset + 59, payload.count)
                packets.append(CTAPHID.padded(header + [sequence] + payload[offset..<end]))
                offset = end
                sequence += 1
            }
            return packets
        }
    }

    package static func channelBytes(_ channel: UInt32) -> [UInt8] {
        [UInt8(channel >> 24), UInt8((channel >> 16) & 0xFF), UInt8((channel >> 8) & 0xFF), UInt8(channel & 0xFF)]
    }

    static func padded(_ bytes: [UInt8]) -> [UInt8] {
        bytes + [UInt8](repeating: 0, count: reportSize - bytes.count)
    }

    /// The channel a report is on (its first four bytes); nil for a report too short to say.
    package static func channel(of report: [UInt8]) -> UInt32? {
        guard report.count >= 4 else { return nil }
        return report[0..<4].reduce(0) { $0 << 8 | UInt32($1) }
    }
}

/// Puts messages back together from reports, as an authenticator must (CTAP 2.1 §11.2.4): one message at a time
/// across all channels. A report that starts a message while another is being assembled on another channel is
/// answered `ERR_CHANNEL_BUSY`; an `INIT` on the assembling channel abandons what was assembled (resynchronization);
/// a continuation out of sequence ends the message with `ERR_INVALID_SEQ`; one on a channel that is not assembling
/// is ignored, as the specification says. A message not completed within the transaction timeout is dropped with
/// `ERR_MSG_TIMEOUT` (the caller passes the time, so the rule can be tested without waiting).
package struct CTAPHIDAssembler: Sendable {
    /// What a report came to.
    package enum Outcome: Equatable, Sendable {
        /// Nothing yet: more continuation packets are due, or the report was ignored.
        case pending
        /// A whole message.
        case message(CTAPHID.Message)
        /// An error to send back on `channel` (the message, if any, is dropped).
        case error(CTAPHID.ErrorCode, channel: UInt32)
    }

    private struct Partial: Sendable {
        var channel: UInt32
        var command: UInt8
        var length: Int
        var payload: [UInt8]
        var nextSequence: UInt8
        var deadline: Double
    }

    private var partial: Partial?
    /// Seconds a client has to send a message's every continuation packet.
    package let transactionTimeout: Double

    package init(transactionTimeout: Double = 3) {
        self.transactionTimeout = transactionTimeout
    }

    /// The channel whose message is being assembled, if any.
    package var assemblingChannel: UInt32? { partial?.channel }

    /// Drops a message whose time ran out at `now`: the channel to answer `ERR_MSG_TIMEOUT` on, if any.
    package mutating func expire(at now: Double) -> UInt32? {
        guard let partial, now >= partial.deadline else { return nil }
        self.partial = nil
        return partial.channel
    }

    /// Takes one report received at `now` (seconds on any monotonic clock).
    package mutating func receive(_ report: [UInt8], at now: Double) -> Outcome {
        // A message whose time ran out no longer holds the transport; its channel hears ERR_MSG_TIMEOUT from the
        // caller's timer, which calls expire(at:) itself.
        _ = expire(at: now)
        guard report.count == CTAPHID.reportSize, let channel = CTAPHID.channel(of: report) else {
            return .pending  // not a report of this transport: nothing to answer
        }
        let kind = report[4]
        if kind & 0x80 != 0 {
            let command = kind & 0x7F
            let length = Int(report[5]) << 8 | Int(report[6])
            if let partial, partial.channel != channel {
                return .error(.channelBusy, channel: channel)
            }
            // An INIT on the assembling channel resynchronizes it; any other command there is out of place.
            if partial != nil && command != CTAPHID.Command.initialize.rawValue {
                self.partial = nil
                return .error(.invalidSequence, channel: channel)
            }
            partial = nil
            guard channel != 0 else { return .error(.invalidChannel, channel: channel) }
            guard length <= CTAPHID.maximumMessage else { return .error(.invalidLength, channel: channel) }
            let first = Array(report[7..<7 + min(57, length)])
            if first.count == length {
                return .message(CTAPHID.Message(channel: channel, command: command, payload: first))
            }
            partial = Partial(
                channel: channel, command: command, length: length, payload: first, nextSequence: 0,
                deadline: now + transactionTimeout)
            return .pending
        }
        guard var assembling = partial, assembling.channel == channel else { return .pending }
        guard kind == assembling.nextSequence else {
            partial = nil
            return .error(.invalidSequence, channel: channel)
        }
        let wanted = min(59, assembling.length - assembling.payload.count)
        assembling.payload += report[5..<5 + wanted]
        assembling.nextSequence += 1
        if assembling.payload.count == assembling.length {
            partial = nil
            return .message(
                CTAPHID.Message(channel: channel, command: assembling.command, payload: assembling.payload))
        }
        partial = assembling
        return .pending
    }
}
