import Foundation
import SecureCrypto
import SecurityProtocol
import SecurityTransport
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The client's end of localauthd's lane (`LaneServer`): a connection of its own for brief requests that cannot
/// prompt, one at a time, passed through the connection's mailbox (``LaneMailbox``) and answered there — no reader
/// thread, no hand-over, and while the calling thread polls for the answer, no system call.
package final class LaneConnection: @unchecked Sendable {
    // @unchecked: used by one thread at a time (`SocketClient` hands it out and takes it back under its lock).
    private let fd: Int32
    private let path: String
    private let mailbox: LaneMailbox
    /// The last request's number in the mailbox.
    private var sequence: UInt32 = 0
    /// When to poll for an answer before sleeping.
    private var polling = PollingBackOff()
    /// False once the connection failed or was closed; it is then dropped.
    private(set) var isOpen = true

    /// Connects to the lane at `path`, checks that process `daemon` serves it (the one behind the main socket:
    /// anything else at the lane's name is not used), says hello and waits for the welcome and its mailbox.
    ///
    /// - Throws: `KeychainStatus(.notAvailable)` when it cannot be used.
    package init(path: String, daemon: Int32, accessGroups: [String], allGroups: Bool) throws {
        self.path = path
        fd = try SocketConnection.connect(path)
        do {
            guard SocketConnection.peerProcess(fd) == daemon else {
                throw KeychainStatus(.notAvailable, "the lane at \(path) is not served by localauthd's process")
            }
            guard
                FrameReader.write(
                    ClientMessage.hello(versions: [1], accessGroups: accessGroups, allGroups: allGroups).encoded(),
                    to: fd)
            else { throw KeychainStatus(.notAvailable, "localauthd's lane at \(path) did not welcome this program") }
            mailbox = try Self.receiveWelcome(fd, path)
        } catch {
            Glibc.close(fd)
            throw error
        }
    }

    deinit {
        Glibc.close(fd)
    }

    /// Reads the welcome frame, which carries the mailbox's descriptor, and maps the mailbox.
    private static func receiveWelcome(_ fd: Int32, _ path: String) throws -> LaneMailbox {
        var bytes = [UInt8](repeating: 0, count: 256)
        var count = 0
        var passed: Int32 = -1
        defer { if passed >= 0 { Glibc.close(passed) } }
        // The welcome is a few bytes, sent at once: read until its frame is whole (the header says how long).
        while count < 5 || count < 5 + (Int(bytes[1]) << 24 | Int(bytes[2]) << 16 | Int(bytes[3]) << 8 | Int(bytes[4]))
        {
            let (read, received) = bytes.withUnsafeMutableBytes {
                LaneMailbox.receive(fd, into: UnsafeMutableRawBufferPointer(rebasing: $0[count...]))
            }
            if received >= 0 {
                if passed >= 0 { Glibc.close(passed) }
                passed = received
            }
            if read < 0 && errno == EINTR { continue }
            guard read > 0, count + read < bytes.count else {
                throw KeychainStatus(.notAvailable, "localauthd's lane at \(path) did not welcome this program")
            }
            count += read
        }
        switch try? ServerMessage(decoding: bytes[0..<count]) {
        case .welcome(1)?:
            guard passed >= 0 else {
                throw KeychainStatus(.notAvailable, "localauthd's lane at \(path) passed no mailbox")
            }
            do {
                return try LaneMailbox(mapping: passed)
            } catch {
                throw KeychainStatus(.notAvailable, "localauthd's lane at \(path): \(error)")
            }
        case .refused(let reason)?:
            throw KeychainStatus(.notAvailable, "localauthd's lane refused: \(reason)")
        default:
            throw KeychainStatus(.notAvailable, "localauthd's lane at \(path) did not welcome this program")
        }
    }

    /// Sends `message` (request number `id`) and returns its answer, polling for it a short while before sleeping;
    /// nil when it goes over the main socket instead: it is too large for the mailbox, it was not delivered (the
    /// daemon's end was gone before it took the request: it stopped or restarted while this connection was idle),
    /// or it is a lookup whose answer is too large for the mailbox.
    ///
    /// - Throws: `KeychainStatus(.notAvailable)` when the connection fails or is refused after the daemon took the
    ///   request (which may have been carried out, as when the main connection drops).
    func request(_ message: ClientMessage, id: UInt64) throws -> ServerMessage? {
        guard isOpen else { return nil }
        guard let answer = try exchange(message.encoded()) else { return nil }
        switch answer {
        case .keychain(id, _), .key(id, _), .keychainFailure(id, _): return answer
        case .refused(let reason):
            close()
            throw KeychainStatus(.notAvailable, "localauthd's lane refused: \(reason)")
        default:
            close()
            throw KeychainStatus(.notAvailable, "localauthd's lane answered another request")
        }
    }

    /// Posts `frame` (any bytes: tests send malformed ones) as the next request and returns the answer's message;
    /// nil as ``request(_:id:)`` describes.
    ///
    /// - Throws: `KeychainStatus(.notAvailable)` when the connection ended after the daemon took the request, or
    ///   the answer does not decode.
    package func exchange(_ frame: SecureBytes) throws -> ServerMessage? {
        guard frame.count <= LaneMailbox.requestCapacity else { return nil }
        let next = sequence &+ 1
        sequence = next
        defer { secureZero(UnsafeMutableRawBufferPointer(rebasing: mailbox.requestArea[0..<frame.count])) }
        let rang = frame.withUnsafeBytes { mailbox.post($0, as: .request, sequence: next, doorbell: fd) }
        // Polled for ``SocketConnection/spinBudget`` unless answers have been slower than that (``PollingBackOff``).
        let budget = polling.budget(SocketConnection.spinBudget)
        let answeredWhilePolling = rang && mailbox.poll(until: .answer, false, next, for: budget)
        if budget > .zero { polling.polled(found: answeredWhilePolling) }
        let answered =
            answeredWhilePolling
            || (rang && mailbox.sleep(until: .answer, false, next, sleeps: .clientSleeps, socket: fd))
        guard answered else {
            // The daemon's end is gone. A request it never copied out was not carried out and may go another way.
            let taken = mailbox.load(.taken) == next
            close()
            guard taken else { return nil }
            throw KeychainStatus(.notAvailable, "the connection to localauthd's lane at \(path) was lost")
        }
        let length = Int(mailbox.load(.answerLength))
        guard length > 0 else { return nil }
        guard length <= LaneMailbox.answerCapacity else {
            close()
            throw KeychainStatus(.notAvailable, "localauthd's lane answered \(length) bytes")
        }
        let answer = UnsafeMutableRawBufferPointer(rebasing: mailbox.answerArea[0..<length])
        defer { secureZero(answer) }
        do {
            return try ServerMessage(decoding: UnsafeRawBufferPointer(answer))
        } catch {
            close()
            throw KeychainStatus(.notAvailable, "localauthd's lane answered a frame that does not decode")
        }
    }

    /// Ends the connection (the descriptor closes with the object).
    package func close() {
        isOpen = false
        shutdown(fd, Int32(SHUT_RDWR))
    }
}
