import NIOCore
import SecureCrypto
import SecurityProtocol
import Synchronization

/// Cuts a connection's bytes into the protocol's frames: a version byte (1), a big-endian UInt32 length, the value.
/// A frame of another version, or one declaring more than the connection's limit, fails the connection before
/// anything of it is buffered (the protocol's frame header has the version first, so NIO's length-field decoder,
/// which wants the length first, does not fit).
///
/// Until the connection's hello is answered the limit is ``FrameAllowance/helloLimit``; after it, a frame longer
/// than that must first reserve its length in the daemon's ``FrameBudget`` (per user and in all), so that no
/// number of connections sending large frames slowly holds more memory than the budget.
struct FrameDecoder: ByteToMessageDecoder {
    typealias InboundOut = ByteBuffer

    /// The longest value accepted after the hello, in bytes.
    let limit: Int
    /// The connection's state: welcomed or not, its user, what it reserved.
    let allowance: FrameAllowance

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        guard let version = buffer.getInteger(at: buffer.readerIndex, as: UInt8.self) else { return .needMoreData }
        guard version == 1 else { throw FrameError.unknownVersion(version) }
        guard let length = buffer.getInteger(at: buffer.readerIndex + 1, as: UInt32.self) else { return .needMoreData }
        let size = Int(length)
        guard size <= (allowance.welcomedUser == nil ? FrameAllowance.helloLimit : limit) else {
            throw FrameError.tooLarge(size)
        }
        if size > FrameAllowance.helloLimit, !allowance.reserve(size) { throw FrameError.overBudget(size) }
        guard let frame = buffer.readSlice(length: 5 + size) else { return .needMoreData }
        allowance.release()
        context.fireChannelRead(wrapInboundOut(frame))
        return .continue
    }

    mutating func decodeLast(
        context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool
    ) throws -> DecodingState {
        let state = try decode(context: context, buffer: &buffer)
        if state == .needMoreData && buffer.readableBytes > 0 { throw FrameError.truncated }
        return state
    }
}

/// One connection's share of the ``FrameBudget``: its user once welcomed, and the large frame it is receiving.
/// Used on the connection's event loop only.
final class FrameAllowance: @unchecked Sendable {
    // Not shared across threads: the decoder and the connection's handler run on the channel's event loop.
    /// The longest frame before the hello is answered, and the longest that needs no reservation.
    static let helloLimit = 64 << 10

    let budget: FrameBudget
    /// The connection's user, set when its hello is answered.
    var welcomedUser: UInt32?
    private var reserved = 0

    init(budget: FrameBudget) {
        self.budget = budget
    }

    deinit {
        release()
    }

    /// Reserves `size` bytes for the frame being received (once per frame); false when the budget has no room.
    func reserve(_ size: Int) -> Bool {
        guard reserved == 0 else { return true }
        guard let uid = welcomedUser, budget.reserve(size, for: uid) else { return false }
        reserved = size
        return true
    }

    /// The frame arrived, or the connection ended: its reservation goes back.
    func release() {
        guard reserved > 0, let uid = welcomedUser else { return }
        budget.release(reserved, for: uid)
        reserved = 0
    }
}

/// How many bytes of large frames localauthd holds while they arrive: at most ``total`` in all and ``perUser`` for
/// the connections of one user. A frame that finds no room fails its connection; other connections go on.
final class FrameBudget: Sendable {
    let total: Int
    let perUser: Int
    private let state = Mutex<(total: Int, users: [UInt32: Int])>((0, [:]))

    init(total: Int, perUser: Int) {
        self.total = total
        self.perUser = perUser
    }

    func reserve(_ size: Int, for uid: UInt32) -> Bool {
        state.withLock { state in
            let user = state.users[uid, default: 0]
            guard state.total + size <= total, user + size <= perUser else { return false }
            state.total += size
            state.users[uid] = user + size
            return true
        }
    }

    func release(_ size: Int, for uid: UInt32) {
        state.withLock { state in
            state.total -= size
            let left = state.users[uid, default: 0] - size
            state.users[uid] = left > 0 ? left : nil
        }
    }
}

/// Why a connection's bytes are not frames.
enum FrameError: Error, CustomStringConvertible {
    case unknownVersion(UInt8)
    case tooLarge(Int)
    case overBudget(Int)
    case truncated

    var description: String {
        switch self {
        case .unknownVersion(let version): "unknown protocol version \(version)"
        case .tooLarge(let length): "a frame of \(length) bytes is over the limit"
        case .overBudget(let length):
            "a frame of \(length) bytes finds no room in localauthd's memory for frames being received (this user's "
                + "connections, or all of them, hold as much as they may)"
        case .truncated: "the connection ended inside a frame"
        }
    }
}

extension ServerMessage {
    /// The message's frame in a buffer for `allocator`, the encoding's zeroizing copy wiped when it goes.
    func frame(_ allocator: ByteBufferAllocator) -> ByteBuffer {
        encoded().withUnsafeBytes { allocator.buffer(bytes: $0) }
    }
}
