import NIOCore
import SecureCrypto
import SecurityProtocol

/// Cuts a connection's bytes into the protocol's frames: a version byte (1), a big-endian UInt32 length, the value.
/// A frame of another version, or one declaring more than `limit` bytes, fails the connection before anything of
/// it is buffered (the protocol's frame header has the version first, so NIO's length-field decoder, which wants
/// the length first, does not fit).
struct FrameDecoder: ByteToMessageDecoder {
    typealias InboundOut = ByteBuffer

    /// The longest value accepted, in bytes.
    let limit: Int

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        guard let version = buffer.getInteger(at: buffer.readerIndex, as: UInt8.self) else { return .needMoreData }
        guard version == 1 else { throw FrameError.unknownVersion(version) }
        guard let length = buffer.getInteger(at: buffer.readerIndex + 1, as: UInt32.self) else { return .needMoreData }
        guard Int(length) <= limit else { throw FrameError.tooLarge(Int(length)) }
        guard let frame = buffer.readSlice(length: 5 + Int(length)) else { return .needMoreData }
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

/// Why a connection's bytes are not frames.
enum FrameError: Error, CustomStringConvertible {
    case unknownVersion(UInt8)
    case tooLarge(Int)
    case truncated

    var description: String {
        switch self {
        case .unknownVersion(let version): "unknown protocol version \(version)"
        case .tooLarge(let length): "a frame of \(length) bytes is over the limit"
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
