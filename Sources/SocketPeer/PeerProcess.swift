import Foundation
import SecureCrypto
import SecurityProtocol
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The process on the other end of a connection, held for as long as the connection lasts: its credentials
/// (`SO_PEERCRED`), a pidfd for it (`SO_PEERPIDFD`, else `pidfd_open`), and the executable it ran when it connected
/// (canonical path and file identity from `/proc/<pid>/exe`; SHA-256 on demand).
///
/// The pidfd names this one process, never a later one with the same pid: a check of `/proc/<pid>` followed by a
/// check that the pidfd's process still runs proves the `/proc` entry was this process's. ``isCurrent`` fails once
/// the process exited or executed another file, so a connection handed to another program by `exec` (or a pid
/// reused after an exit) is never served as the program that connected.
package final class PeerProcess: Sendable {
    package let credentials: PeerCredentials
    /// The executable's canonical path, as the kernel reports it (`/proc/<pid>/exe`); `(deleted)` is kept when the
    /// file was removed or replaced while the process ran.
    package let executable: String
    let file: FileIdentity
    /// The executable's device and inode, as the process ran it when it connected.
    package var executableFile: (device: UInt64, inode: UInt64) { (file.device, file.inode) }
    private let pidfd: Int32
    /// `/proc/<pid>`, opened once: it stays this process's entry (a later process with the pid gets another one).
    let procEntry: Int32
    /// The process's executions and exit, as the kernel reports them (nil where it does not: ``ProcessEvents``).
    private let events: ProcessEvents.Watcher?
    /// Set once the process was found no longer current: it stays so.
    private let gone = Atomic<Bool>(false)

    /// Which file an executable is: device, inode, size and change times (a file rewritten in place changes them).
    package struct FileIdentity: Hashable, Sendable {
        var device: UInt64
        var inode: UInt64
        var size: Int64
        var modified: Int64
        var changed: Int64

        /// The identity of `name` under directory `directory` (following links).
        init?(_ name: String, in directory: Int32) {
            var info = stat()
            guard fstatat(directory, name, &info, 0) == 0 else { return nil }
            device = UInt64(info.st_dev)
            inode = UInt64(info.st_ino)
            size = Int64(info.st_size)
            modified = Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec)
            changed = Int64(info.st_ctim.tv_sec) * 1_000_000_000 + Int64(info.st_ctim.tv_nsec)
        }
    }

    /// Why a peer cannot be identified.
    package struct Unidentified: Error, CustomStringConvertible {
        package var description: String

        package init(description: String) {
            self.description = description
        }
    }

    /// The peer with `credentials` whose pidfd the kernel gave (`pidfd` < 0: none, then one is opened by pid).
    ///
    /// - Throws: ``Unidentified`` when the process is gone or its executable cannot be read.
    package init(credentials: PeerCredentials, pidfd given: Int32) throws(Unidentified) {
        self.credentials = credentials
        let pidfd = given >= 0 ? given : Self.openPidfd(credentials.pid)
        guard pidfd >= 0 else {
            throw Unidentified(description: "process \(credentials.pid) has no pidfd (it is gone)")
        }
        // Watched before its executable is read: an exec after the read is reported.
        let events = ProcessEvents.shared?.watch(credentials.pid)
        self.events = events
        let procEntry = open("/proc/\(credentials.pid)", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard procEntry >= 0, let path = Self.readLink("exe", in: procEntry),
            let file = FileIdentity("exe", in: procEntry)
        else {
            close(pidfd)
            if procEntry >= 0 { close(procEntry) }
            if let events { ProcessEvents.shared?.unwatch(events) }
            throw Unidentified(description: "the executable of process \(credentials.pid) cannot be read")
        }
        self.pidfd = pidfd
        self.procEntry = procEntry
        executable = path
        self.file = file
        // Read before this check, the /proc entry was this process's: a reused pid needs the process gone first.
        guard Self.isRunning(pidfd) else {
            throw Unidentified(description: "process \(credentials.pid) exited while it connected")
        }
    }

    /// The process `reference` names (pid, start time and the file it ran), of user `uid`, named by another program
    /// rather than connected: a program an administrative tool asks on behalf of.
    ///
    /// - Throws: ``Unidentified`` when no such process runs (gone, its pid reused by a later one, another user's, one
    ///   that changed ids, or one that runs another file than the one named: it exec'd since), or its executable
    ///   cannot be read.
    package static func named(_ reference: ProcessReference, uid: UInt32) throws(Unidentified) -> PeerProcess {
        let pid = reference.pid
        guard let named = reference.executable else {
            throw Unidentified(description: "the process named does not say which file it runs")
        }
        guard let gid = Self.soleIdentity(of: pid, uid: uid) else {
            throw Unidentified(description: "process \(pid) is not a process of uid \(uid) alone")
        }
        let process = try PeerProcess(credentials: PeerCredentials(pid: pid, uid: uid, gid: gid), pidfd: -1)
        // Read while the pidfd holds the process: a start time that matches, then a process still running, is the
        // process that was named, not a later one under a reused pid; the file it was identified by is the one
        // named, and its ids are still the user's alone (no set-user-ID exec since).
        guard ProcessReference.running(pid)?.startTime == reference.startTime,
            process.file.device == named.device, process.file.inode == named.inode,
            Self.soleIdentity(of: pid, uid: uid) == gid, Self.isRunning(process.pidfd)
        else {
            throw Unidentified(
                description: "process \(pid) is not the one named (it started at another time or runs another file)")
        }
        return process
    }

    /// The real group of process `pid` when every one of its user ids (real, effective, saved, file system) is
    /// `uid`; nil otherwise or when it is gone.
    private static func soleIdentity(of pid: Int32, uid: UInt32) -> UInt32? {
        guard pid > 0, let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else {
            return nil
        }
        func ids(_ name: String) -> [UInt32] {
            guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix(name + ":") }) else { return [] }
            return line.dropFirst(name.count + 1).split(whereSeparator: { $0 == " " || $0 == "\t" }).compactMap {
                UInt32($0)
            }
        }
        let uids = ids("Uid")
        guard uids.count == 4, uids.allSatisfy({ $0 == uid }) else { return nil }
        return ids("Gid").first
    }

    deinit {
        if let events { ProcessEvents.shared?.unwatch(events) }
        close(pidfd)
        close(procEntry)
    }

    /// Whether the process still runs the executable it connected with: not exited, and `/proc/<pid>/exe` is still
    /// the same file (an `exec` of anything else, even a copy of the same program, changes it).
    ///
    /// Where the kernel reports process events (``ProcessEvents``), the queue is drained and the process checked
    /// the full way only when it executed or exited since its last check (or events were lost). The full way is one
    /// system call: `exe` under the `/proc` entry opened at the connection resolves only while this very process
    /// has its memory — it fails once the process exited (a zombie has none) and never reaches a later process
    /// with the same pid, whose entry is another one. So no separate check of the pidfd is needed.
    package var isCurrent: Bool {
        guard !gone.load(ordering: .acquiring) else { return false }
        if let events, let watch = ProcessEvents.shared {
            watch.drain()
            // Cleared before the full check: an exec after this point is reported again, and one before it is
            // what the full check sees.
            if !events.takeStale() { return true }
        }
        guard FileIdentity("exe", in: procEntry) == file else {
            gone.store(true, ordering: .releasing)
            return false
        }
        return true
    }

    /// Whether the process has exited (its pidfd says so: never a later process with the same pid).
    package var hasExited: Bool { !Self.isRunning(pidfd) }

    /// The SHA-256 of the executable the process runs, read through `/proc/<pid>/exe` (the very file, even when
    /// its path was replaced) and remembered per file version (``ExecutableDigests``), so each program is hashed
    /// once; nil when it cannot be read, the process no longer runs it, or it was not hashed (over the size limit or
    /// its user's budget: ``digestOutcome()`` says which).
    ///
    /// Reading may take long (a large executable): call it on threads that serve no other caller's requests.
    package func executableDigest() -> Data? {
        if case .digest(let digest) = digestOutcome() { return digest }
        return nil
    }

    /// The executable's digest, or why it has none: ``ExecutableDigests/shared`` hashes it within the limits of the
    /// process's user.
    package func digestOutcome() -> ExecutableDigests.Outcome {
        let outcome = ExecutableDigests.shared.digest(of: file, uid: credentials.uid) {
            openat(procEntry, "exe", O_RDONLY | O_CLOEXEC)
        }
        // The file read was this process's executable only if it still runs it now.
        if case .digest = outcome, !isCurrent { return .unreadable }
        return outcome
    }

    /// The executable's SHA-256 if it was read already (by this connection or another of the same file version).
    package var knownDigest: Data? {
        ExecutableDigests.shared.known(file)
    }

    /// A digest naming the executable's file version (device, inode, size and times) rather than its contents: the
    /// private group of a program that was not hashed.
    package var fileVersionDigest: Data {
        var hash = SHA256()
        hash.update(Data("localauthd file version".utf8))
        for value in [
            file.device, file.inode, UInt64(bitPattern: file.size), UInt64(bitPattern: file.modified),
            UInt64(bitPattern: file.changed),
        ] {
            withUnsafeBytes(of: value.bigEndian) { hash.update($0) }
        }
        return hash.finalize()
    }

    /// Which file version the process runs: what a reuse window is keyed by (a rebuilt or replaced executable is
    /// another program).
    package var fileVersion: FileIdentity { file }

    /// Whether the executable is the file at `path` as the daemon sees it (its own mount namespace, links
    /// followed): the same device and inode.
    package func runsFile(at path: String) -> Bool {
        var info = stat()
        guard stat(path, &info) == 0 else { return false }
        return UInt64(info.st_dev) == file.device && UInt64(info.st_ino) == file.inode
    }

    /// How the process was started and what code it maps (``ProgramIntegrity``), checked now; a process that no
    /// longer runs its executable is tainted.
    package func integrity() -> ProgramIntegrity {
        let found = ProgramIntegrity.check(procEntry: procEntry, executable: (file.device, file.inode))
        guard isCurrent else { return ProgramIntegrity(taint: "it no longer runs \(executable)") }
        return found
    }

    /// `pidfd_open(pid, 0)` through glibc (2.36 and later), for kernels that give no `SO_PEERPIDFD`; -1 when
    /// neither has it.
    private static func openPidfd(_ pid: pid_t) -> Int32 {
        typealias PidfdOpen = @convention(c) (pid_t, UInt32) -> Int32
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "pidfd_open") else { return -1 }
        return unsafeBitCast(symbol, to: PidfdOpen.self)(pid, 0)
    }

    /// Whether the pidfd's process has not exited (a pidfd becomes readable when it does).
    private static func isRunning(_ pidfd: Int32) -> Bool {
        var descriptor = pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0)
        return poll(&descriptor, 1, 0) == 0
    }

    private static func readLink(_ name: String, in directory: Int32) -> String? {
        var buffer = [UInt8](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = buffer.withUnsafeMutableBytes {
            readlinkat(directory, name, $0.baseAddress!.assumingMemoryBound(to: CChar.self), $0.count - 1)
        }
        guard count > 0 else { return nil }
        return String(decoding: buffer[0..<count], as: UTF8.self)
    }
}
