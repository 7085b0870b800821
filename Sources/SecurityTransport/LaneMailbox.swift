import CSocket
import SecureCrypto

#if canImport(Glibc)
    import Glibc
#endif

/// The lane's mailbox: memory shared by localauthd and one lane connection's client, through which requests and
/// answers pass once the connection is welcomed (`docs/PROTOCOL.md`, "The lane"). A round trip through the kernel's
/// socket costs each side a `send` and a `recv` and both processes a hand-over; through shared memory the other side
/// sees a request or an answer as soon as it is written, while it polls. The connection's socket stays what identifies
/// the client (its credentials and the hello), tells either side that the other went away, and carries a one-byte
/// doorbell to a side that stopped polling and sleeps in `recv`.
///
/// localauthd makes the mailbox (a memfd sealed against any change of size, so a client cannot make the daemon's next
/// access fault) and passes it with the welcome. Layout, every word a `UInt32` in the machine's byte order:
///
/// | offset | word | written by |
/// |---|---|---|
/// | 0 | request: the sequence number of the request last posted | client |
/// | 4 | its frame's length | client |
/// | 64 | taken: the sequence number of the request the daemon last copied out | daemon |
/// | 128 | answer: the sequence number of the request last answered | daemon |
/// | 132 | its frame's length (0: too large for the mailbox, ask again on the main socket) | daemon |
/// | 192 | the daemon sleeps (1) or polls (0) | daemon |
/// | 256 | the client sleeps (1) or polls (0) | client |
/// | 4096 | the request's frame, at most ``requestCapacity`` bytes | client |
/// | 4096 + ``requestCapacity`` | the answer's frame, at most ``answerCapacity`` bytes | daemon |
///
/// A side posts by writing the frame, its length, then the sequence number (ordered); it then reads the other side's
/// sleeping word and, when set, writes one byte to the socket. A side that stops polling sets its sleeping word
/// (ordered), looks once more, and only then sleeps in `recv`, so no post is missed between the two.
///
/// The daemon trusts nothing in the mailbox: it reads a request's length once, checks it, copies the frame into
/// memory of its own and decodes only that copy (the client may rewrite the mailbox at any moment). Whatever a client
/// writes there can only spoil its own requests.
package final class LaneMailbox: @unchecked Sendable {
    // @unchecked: shared memory, touched only through the atomic words and by the one thread serving or using the
    // connection at a time.

    /// The largest request frame the mailbox carries; a larger request takes the main socket.
    package static let requestCapacity = 1 << 20
    /// The largest answer frame the mailbox carries; a larger lookup answer is asked for again on the main socket.
    package static let answerCapacity = 2 << 20
    static let headerSize = 4096
    /// The mailbox's size in bytes (its pages are touched only as frames need them).
    package static let size = headerSize + requestCapacity + answerCapacity

    /// The mailbox's words, by byte offset.
    package enum Word: Int {
        case request = 0
        case requestLength = 4
        case taken = 64
        case answer = 128
        case answerLength = 132
        case daemonSleeps = 192
        case clientSleeps = 256
    }

    private let base: UnsafeMutableRawPointer

    /// Why a mailbox cannot be made or used.
    package struct Unusable: Error, CustomStringConvertible {
        package var description: String
    }

    /// A new mailbox, mapped, and its descriptor to pass to the client (close-on-exec, sealed against any change of
    /// size; the caller closes it once passed: the mapping stays).
    ///
    /// - Throws: ``Unusable`` when the kernel refuses the memfd or the mapping.
    package static func make() throws(Unusable) -> (mailbox: LaneMailbox, descriptor: Int32) {
        let descriptor = la_sealed_memfd("localauthd-lane", Int64(size))
        guard descriptor >= 0 else {
            throw Unusable(description: "no memfd for the lane: \(String(cString: strerror(errno)))")
        }
        do {
            return (try LaneMailbox(mapping: descriptor), descriptor)
        } catch {
            close(descriptor)
            throw error
        }
    }

    /// The mailbox passed as `descriptor` (which the caller still owns), mapped after checking that it is a memfd
    /// that can never shrink below the mailbox's size (what the daemon passes).
    ///
    /// - Throws: ``Unusable`` for anything else.
    package init(mapping descriptor: Int32) throws(Unusable) {
        var info = stat()
        guard fstat(descriptor, &info) == 0, Int(info.st_size) == Self.size else {
            throw Unusable(description: "the lane's mailbox is not \(Self.size) bytes")
        }
        let seals = la_seals(descriptor)
        guard seals >= 0, seals & LA_SEAL_SHRINK != 0 else {
            throw Unusable(description: "the lane's mailbox is not sealed against shrinking")
        }
        guard let mapped = mmap(nil, Self.size, PROT_READ | PROT_WRITE, MAP_SHARED, descriptor, 0),
            mapped != MAP_FAILED
        else {
            throw Unusable(description: "the lane's mailbox cannot be mapped: \(String(cString: strerror(errno)))")
        }
        base = mapped
    }

    deinit {
        munmap(base, Self.size)
    }

    private func word(_ word: Word) -> UnsafeMutablePointer<UInt32> {
        (base + word.rawValue).assumingMemoryBound(to: UInt32.self)
    }

    /// The word's value (an ordered load).
    package func load(_ word: Word) -> UInt32 {
        la_load_ordered(self.word(word))
    }

    /// Sets the word (an ordered store).
    package func store(_ word: Word, _ value: UInt32) {
        la_store_ordered(self.word(word), value)
    }

    package var requestArea: UnsafeMutableRawBufferPointer {
        UnsafeMutableRawBufferPointer(start: base + Self.headerSize, count: Self.requestCapacity)
    }

    package var answerArea: UnsafeMutableRawBufferPointer {
        UnsafeMutableRawBufferPointer(start: base + Self.headerSize + Self.requestCapacity, count: Self.answerCapacity)
    }

    /// Receives up to `buffer.count` bytes from `socket` and the descriptor passed with them (close-on-exec; -1
    /// when none came): how a client reads the welcome that carries its mailbox. `count` is what `recvmsg` returned.
    package static func receive(
        _ socket: Int32, into buffer: UnsafeMutableRawBufferPointer
    ) -> (count: Int, descriptor: Int32) {
        var passed: Int32 = -1
        let count = la_receive_with_descriptor(socket, buffer.baseAddress, buffer.count, &passed)
        return (count, passed)
    }

    // MARK: Posting

    /// Writes `frame` as the request (or, `.answer`, the answer) numbered `sequence`, and rings the doorbell on
    /// `socket` when the other side sleeps. False when the frame does not fit, or the doorbell could not be rung
    /// because the other side's end of the socket is gone.
    package func post(_ frame: UnsafeRawBufferPointer, as kind: Word, sequence: UInt32, doorbell socket: Int32) -> Bool
    {
        let (area, length, sleeper): (UnsafeMutableRawBufferPointer, Word, Word) =
            kind == .request ? (requestArea, .requestLength, .daemonSleeps) : (answerArea, .answerLength, .clientSleeps)
        guard frame.count <= area.count else { return false }
        if let source = frame.baseAddress, !frame.isEmpty {
            area.baseAddress!.copyMemory(from: source, byteCount: frame.count)
        }
        la_store_release(word(length), UInt32(frame.count))
        store(kind, sequence)
        guard load(sleeper) != 0 else { return true }
        return Self.ring(socket)
    }

    /// Writes one byte to `socket` without waiting: a doorbell already unread (a full buffer) wakes the sleeper just
    /// as well. False when the other end is gone.
    private static func ring(_ socket: Int32) -> Bool {
        var byte: UInt8 = 1
        while true {
            if send(socket, &byte, 1, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) == 1 { return true }
            switch errno {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK: return true
            default: return false
            }
        }
    }

    // MARK: Waiting

    /// Waits until `word` no longer holds `value` (`differs`) or holds it (`!differs`): polls for `budget` (see
    /// ``poll(until:_:_:for:)``), then sets `sleeps` and sleeps in `recv` on `socket` until a doorbell. False when the
    /// socket ended or failed first.
    package func wait(
        until word: Word, _ differs: Bool, _ value: UInt32, sleeps: Word, socket: Int32, polling budget: Duration
    ) -> Bool {
        if poll(until: word, differs, value, for: budget) { return true }
        return sleep(until: word, differs, value, sleeps: sleeps, socket: socket)
    }

    /// Polls `word` for `budget` without sleeping; true as soon as it no longer holds `value` (`differs`) or holds
    /// it (`!differs`), false when the budget passed first.
    package func poll(until word: Word, _ differs: Bool, _ value: UInt32, for budget: Duration) -> Bool {
        let target = self.word(word)
        func ready() -> Bool { (la_load_ordered(target) != value) == differs }
        if ready() { return true }
        guard budget > .zero else { return false }
        let clock = ContinuousClock()
        let deadline = clock.now + budget
        repeat {
            // A few pauses between yields: the other side may have been woken on this very processor.
            for _ in 0..<4 {
                if ready() { return true }
                la_processor_pause()
            }
            sched_yield()
        } while clock.now < deadline
        return ready()
    }

    /// Sets `sleeps`, looks once more, and sleeps in `recv` on `socket` until a doorbell, as long as `word` is not
    /// ready (see ``wait(until:_:_:sleeps:socket:polling:)``). False when the socket ended or failed first.
    package func sleep(until word: Word, _ differs: Bool, _ value: UInt32, sleeps: Word, socket: Int32) -> Bool {
        let target = self.word(word)
        func ready() -> Bool { (la_load_ordered(target) != value) == differs }
        var doorbells: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        while true {
            store(sleeps, 1)
            if ready() {
                store(sleeps, 0)
                return true
            }
            let count = withUnsafeMutableBytes(of: &doorbells) { recv(socket, $0.baseAddress, $0.count, 0) }
            store(sleeps, 0)
            if count == 0 || (count < 0 && errno != EINTR) { return ready() }
            if ready() { return true }
        }
    }
}

/// When a side of the lane polls for the other's next post before sleeping. Polling saves a wake-up when the post
/// comes within the budget (one program sending requests in a row); when it does not, the processor it took was
/// another thread's share — with many clients at once, the daemon's. So after a poll that came up empty, the next
/// 1, 2, 4 … 64 waits sleep at once; a poll that finds the post ends the back-off.
package struct PollingBackOff: Sendable {
    private var unpolled = 0
    private var backOff = 0

    package init() {}

    /// How long the next wait polls: `budget`, or zero while backing off.
    package mutating func budget(_ budget: Duration) -> Duration {
        guard unpolled == 0 else {
            unpolled -= 1
            return .zero
        }
        return budget
    }

    /// What a wait that polled (with a budget above zero) found.
    package mutating func polled(found: Bool) {
        backOff = found ? 0 : min(max(backOff * 2, 1), 64)
        unpolled = backOff
    }
}
