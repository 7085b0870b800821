import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A client for libfprint's `virtual_device` / `virtual_device_storage` socket protocol.
///
/// The wire rules (linux-backends.md §1.3): one command per connection, no trailing newline, shut down the write
/// side, read until the driver closes (only `LIST` replies), then the next command. The socket exists only while
/// the device is open, so connecting retries on ENOENT and ECONNREFUSED. Each call runs on its own thread
/// because it blocks until libfprint's thread pumps its main context. The driver reads a command only while an
/// enroll, verify or identify runs, so the wait is generous by default (60 s for each command): on a loaded machine
/// the operation that takes it may start late.
package struct VirtualReaderSocket: Sendable {
    package struct Failure: Error, CustomStringConvertible {
        package var description: String
    }

    package let path: String

    package init(path: String) { self.path = path }

    /// Sends each command in order, each on its own connection; returns the replies.
    @discardableResult
    package func send(_ commands: String..., timeout: Duration = .seconds(60)) async throws -> [String] {
        try await send(commands, timeout: timeout)
    }

    /// Sends each command in order, each on its own connection; returns the replies.
    @discardableResult
    package func send(_ commands: [String], timeout: Duration = .seconds(60)) async throws -> [String] {
        let path = self.path
        // Cancelling the task stops waiting for the device between attempts (a command already delivered stays so).
        let cancelled = Atomic(false)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let thread = Thread {
                    continuation.resume(
                        with: Result {
                            try commands.map {
                                try Self.exchange($0, path: path, timeout: timeout) {
                                    cancelled.load(ordering: .relaxed)
                                }
                            }
                        })
                }
                thread.start()
            }
        } onCancel: {
            cancelled.store(true, ordering: .relaxed)
        }
    }

    private static func exchange(
        _ command: String, path: String, timeout: Duration, isCancelled: () -> Bool
    ) throws -> String {
        precondition(!command.hasSuffix("\n"), "the virtual device takes no trailing newline")
        let wait = Wait(command: command, path: path, started: .now, limit: timeout)
        // A device closed between our connect and its read resets the connection: the command was not taken, and
        // goes to the device's next opening (fprintd opens it for each claim).
        while true {
            if isCancelled() { throw CancellationError() }
            let reply = try attempt(command, path: path, wait: wait, isCancelled: isCancelled)
            if let reply { return reply }
            guard ContinuousClock.now < wait.deadline else { throw wait.failure("every connection was reset") }
            usleep(10_000)
        }
    }

    /// One command's wait: when it started and how long it may take, for the receive timeouts and the message of a
    /// command no driver took.
    private struct Wait {
        let command: String
        let path: String
        let started: ContinuousClock.Instant
        let limit: Duration
        var deadline: ContinuousClock.Instant { started + limit }

        /// What is left of the limit, in whole seconds, at least one: each connection's receive timeout.
        var remaining: timeval {
            let left = max(deadline - .now, .seconds(1))
            return timeval(tv_sec: Int(left.components.seconds) + 1, tv_usec: 0)
        }

        func failure(_ why: String) -> Failure {
            Failure(
                description:
                    "waited \(ContinuousClock.now - started) (limit \(limit)) for the driver at \(path) to take "
                    + "'\(command)': \(why)")
        }
    }

    /// One delivery of `command`: the reply, or nil when the connection was reset before the driver took it.
    private static func attempt(
        _ command: String, path: String, wait: Wait, isCancelled: () -> Bool
    ) throws -> String? {
        let fd = try connect(path: path, deadline: wait.deadline, isCancelled: isCancelled)
        defer { close(fd) }
        var receiveTimeout = wait.remaining
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &receiveTimeout, socklen_t(MemoryLayout<timeval>.size))
        let bytes = Array(command.utf8)
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 {
                if errno == EINTR { continue }
                throw Failure(description: "send '\(command)': \(String(cString: strerror(errno)))")
            }
            sent += n
        }
        shutdown(fd, Int32(SHUT_WR))
        var reply = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 {
                if errno == EINTR { continue }
                let code = errno
                if code == ECONNRESET && reply.isEmpty { return nil }
                throw wait.failure(
                    code == EAGAIN || code == EWOULDBLOCK
                        ? "no operation read it (the driver takes commands only while an enroll, verify or identify runs)"
                        : String(cString: strerror(code)))
            }
            if n == 0 { break }
            reply += buffer[0..<n]
        }
        return String(decoding: reply, as: UTF8.self)
    }

    private static func connect(
        path: String, deadline: ContinuousClock.Instant, isCancelled: () -> Bool
    ) throws -> Int32 {
        while true {
            if isCancelled() { throw CancellationError() }
            let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            guard fd >= 0 else { throw Failure(description: "socket: \(String(cString: strerror(errno)))") }
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            let pathBytes = Array(path.utf8)
            precondition(pathBytes.count < MemoryLayout.size(ofValue: address.sun_path), "socket path too long")
            withUnsafeMutableBytes(of: &address.sun_path) { raw in
                raw.copyBytes(from: pathBytes)
                raw[pathBytes.count] = 0
            }
            let result = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                }
            }
            if result == 0 { return fd }
            let code = errno
            close(fd)
            guard code == ENOENT || code == ECONNREFUSED, ContinuousClock.now < deadline else {
                throw Failure(description: "connect \(path): \(String(cString: strerror(code)))")
            }
            usleep(10_000)
        }
    }
}
