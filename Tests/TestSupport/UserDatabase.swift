import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The machine's password and group files, which several suites edit to make throwaway users (useradd, usermod,
/// chpasswd, userdel). Shadow's tools do not wait for the files' lock: they fail at once while another tool holds
/// it. So the suites' edits go one at a time, through one lock file, across this test process's suites (which run
/// side by side) and across test processes of other clones on the machine.
package enum UserDatabase {
    /// The lock file, in /tmp (every process on the machine sees the same one).
    static let lockPath = "/tmp/la-tests-user-database.lock"

    /// Runs `body` (one run of a tool that edits the user database) holding the lock; a lock file that cannot be
    /// opened leaves `body` to run unlocked, as the tools ran before.
    package static func editing<Result>(_ body: () throws -> Result) rethrows -> Result {
        let descriptor = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o666)
        if descriptor >= 0 {
            fchmod(descriptor, 0o666)
            while flock(descriptor, LOCK_EX) != 0 && errno == EINTR {}
        }
        // Closing the descriptor releases the lock.
        defer { if descriptor >= 0 { close(descriptor) } }
        return try body()
    }
}
