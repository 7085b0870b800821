import NIOCore

#if canImport(Glibc)
    import Glibc
#endif

/// The process on the other end of a Unix-socket connection, as the kernel reports it when it connected
/// (`SO_PEERCRED`): identity from the kernel, never from a message. Linux's `struct ucred` (which Swift's Glibc
/// module leaves out without `_GNU_SOURCE`): three 32-bit fields.
package struct PeerCredentials: Sendable, Equatable {
    package var pid: Int32 = 0
    package var uid: UInt32 = 0
    package var gid: UInt32 = 0

    package init(pid: Int32 = 0, uid: UInt32 = 0, gid: UInt32 = 0) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
    }
}

/// The kernel gave no credentials for a connection (not a Unix socket).
package struct PeerCredentialsUnavailable: Error {}

extension Channel {
    /// The connected process's credentials (`SO_PEERCRED`).
    package func peerCredentials() -> EventLoopFuture<PeerCredentials> {
        guard let provider = self as? any SocketOptionProvider else {
            return eventLoop.makeFailedFuture(PeerCredentialsUnavailable())
        }
        return provider.unsafeGetSocketOption(level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(SO_PEERCRED))
    }

    /// A pidfd for the connected process (`SO_PEERPIDFD`, Linux 6.5 and later); -1 where the kernel has none.
    package func peerPidfd() -> EventLoopFuture<Int32> {
        guard let provider = self as? any SocketOptionProvider else { return eventLoop.makeSucceededFuture(-1) }
        let future: EventLoopFuture<Int32> = provider.unsafeGetSocketOption(
            level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(77))  // SO_PEERPIDFD
        return future.recover { _ in -1 }
    }
}

extension PeerCredentials {
    /// The credentials of the process on the other end of connected Unix socket `descriptor` (`SO_PEERCRED`); nil
    /// when the kernel gives none.
    package static func of(descriptor: Int32) -> PeerCredentials? {
        var credentials = PeerCredentials()
        var length = socklen_t(MemoryLayout<PeerCredentials>.size)
        guard getsockopt(descriptor, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0,
            length == socklen_t(MemoryLayout<PeerCredentials>.size)
        else { return nil }
        return credentials
    }

    /// A pidfd for the process on the other end of `descriptor` (`SO_PEERPIDFD`); -1 where the kernel has none.
    package static func pidfd(of descriptor: Int32) -> Int32 {
        var pidfd: Int32 = -1
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(descriptor, SOL_SOCKET, 77, &pidfd, &length) == 0 else { return -1 }  // SO_PEERPIDFD
        return pidfd
    }
}
