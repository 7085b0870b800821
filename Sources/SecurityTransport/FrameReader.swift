import CSocket
import SecureCrypto

#if canImport(Glibc)
    import Glibc
#endif

/// Reads frames from a blocking stream socket (a format-version byte, a big-endian UInt32 length, the value) into a
/// buffer of its own, as many bytes at a time as have arrived, and hands each whole frame where it lies: the lane's
/// hello in localauthd's `LaneServer` (its requests then pass through the connection's mailbox). The buffer is
/// wiped as frames are used and when the reader goes, because frames carry secrets.
package final class FrameReader {
    private let descriptor: Int32
    private let limit: Int
    private let version: UInt8
    private var storage: UnsafeMutableRawPointer
    private var capacity = 16_384
    /// The unread bytes are `start..<end`.
    private var start = 0
    private var end = 0

    /// A reader of `descriptor` that refuses frames of another format `version` than the one given (the protocol's
    /// `MessageWriter.formatVersion`) and frames whose value is longer than `limit` bytes.
    package init(descriptor: Int32, limit: Int, version: UInt8) {
        self.descriptor = descriptor
        self.limit = limit
        self.version = version
        storage = allocateBytes(capacity)
    }

    deinit {
        secureZero(UnsafeMutableRawBufferPointer(start: storage, count: end))
        deallocateBytes(storage)
    }

    /// What `body` makes of the next whole frame (its header included): a span that cannot leave `body`, as the
    /// frame is wiped after it; nil when the stream ends between frames.
    ///
    /// - Throws: ``FrameReadError`` for another format version, a length over the limit, a stream that ends inside
    ///   a frame or fails; what `body` throws.
    package func next<Result>(_ body: (RawSpan) throws -> Result) throws -> Result? {
        while true {
            if end - start >= 5 {
                let found = storage.load(fromByteOffset: start, as: UInt8.self)
                guard found == version else {
                    throw FrameReadError(description: "unknown protocol version \(found)")
                }
                let length = Int(UInt32(bigEndian: storage.loadUnaligned(fromByteOffset: start + 1, as: UInt32.self)))
                guard length <= limit else {
                    throw FrameReadError(description: "a frame of \(length) bytes is over the limit")
                }
                let total = 5 + length
                if end - start >= total {
                    let frame = start
                    defer {
                        secureZero(UnsafeMutableRawBufferPointer(start: storage + frame, count: total))
                        start += total
                        if start == end { (start, end) = (0, 0) }
                    }
                    return try body(RawSpan(_unsafeStart: storage + frame, byteCount: total))
                }
                makeRoom(for: total)
            } else {
                makeRoom(for: 5)
            }
            let count = recv(descriptor, storage + end, capacity - end, 0)
            if count < 0 && errno == EINTR { continue }
            if count == 0 {
                guard start == end else { throw FrameReadError(description: "the connection ended inside a frame") }
                return nil
            }
            guard count > 0 else {
                throw FrameReadError(description: "the connection failed: \(String(cString: strerror(errno)))")
            }
            end += count
        }
    }

    /// Room for a frame of `total` bytes from `start`: the unread bytes moved to the front, the buffer grown.
    private func makeRoom(for total: Int) {
        guard capacity - start < total || end == capacity else { return }
        let unread = end - start
        let size = Swift.max(capacity, total)
        let fresh = allocateBytes(size)
        fresh.copyMemory(from: storage + start, byteCount: unread)
        secureZero(UnsafeMutableRawBufferPointer(start: storage, count: end))
        deallocateBytes(storage)
        (storage, capacity, start, end) = (fresh, size, 0, unread)
    }

    /// Returns when `descriptor` has something to read or `budget` passed, polling without sleeping and giving the
    /// processor to whoever else may run between polls (the other end of a local socket is often woken on this very
    /// processor: a poll that did not yield would keep it from answering).
    package static func awaitReadable(_ descriptor: Int32, for budget: Duration) {
        guard budget > .zero else { return }
        let clock = ContinuousClock()
        let deadline = clock.now + budget
        var polled = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        while poll(&polled, 1, 0) == 0, clock.now < deadline {
            sched_yield()
        }
    }

    /// Writes `frame` whole; false when the connection failed.
    package static func write(_ frame: SecureBytes, to descriptor: Int32) -> Bool {
        frame.withUnsafeBytes { bytes in
            var sent = 0
            while sent < bytes.count {
                let count = send(descriptor, bytes.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL))
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { return false }
                sent += count
            }
            return true
        }
    }
}

/// Why a stream's bytes are not frames.
package struct FrameReadError: Error, CustomStringConvertible {
    package var description: String
}
