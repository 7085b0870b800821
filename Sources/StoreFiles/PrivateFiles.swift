import Foundation
import SecureCrypto

#if canImport(Glibc)
    import Glibc
#endif

/// Why a private store file could not be used: its path and the system's reason, never its contents.
package struct PrivateFileError: Error, CustomStringConvertible, Sendable {
    /// What went wrong, with the path.
    package var message: String
    /// The `errno` behind it, when there is one.
    package var errno: Int32?

    /// A failure described by `message`, with the system's text for `code` appended.
    package init(_ message: String, errno code: Int32?) {
        self.message = code.map { "\(message): \(String(cString: strerror($0)))" } ?? message
        self.errno = code
    }

    package var description: String { message }
}

/// The POSIX file operations every part of a store uses, written once: directories 0700, files 0600, writes that
/// are atomic on crash (an exclusive temporary file with an unpredictable name, `fsync`, `rename`, `fsync` of the
/// directory), advisory locks, and key files that are trusted only when they look private.
///
/// Nothing here follows a symbolic link at a path it creates or reads a secret from (`O_NOFOLLOW`, `O_EXCL`), so a
/// link planted in a store directory, or at a temporary name beside a file being written, is never written through.
package enum PrivateFiles {
    /// Creates `path` and its missing parents with mode 0700; an existing directory gets its mode tightened to
    /// 0700 when it is ours. - Throws: ``PrivateFileError`` when it cannot.
    package static func ensureDirectory(_ path: String) throws {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) {
            guard isDirectory.boolValue else {
                throw PrivateFileError("\(path) exists and is not a directory", errno: ENOTDIR)
            }
        } else {
            do {
                try FileManager.default.createDirectory(
                    atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            } catch {
                throw PrivateFileError("cannot create directory \(path)", errno: Glibc.errno)
            }
        }
        var info = stat()
        if stat(path, &info) == 0, info.st_uid == geteuid(), info.st_mode & 0o077 != 0 {
            _ = chmod(path, 0o700)
        }
    }

    /// Whether `path` exists (a dangling link counts as existing: it is never replaced silently).
    package static func exists(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0
    }

    /// The contents of `path`, or nil when it does not exist. - Throws: on any other read error, and for a
    /// symbolic link.
    package static func read(_ path: String) throws -> Data? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        if fd < 0 {
            if errno == ENOENT { return nil }
            throw PrivateFileError("cannot open \(path)", errno: errno)
        }
        defer { close(fd) }
        var data = Data()
        var chunk = [UInt8](repeating: 0, count: 16384)
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw PrivateFileError("cannot read \(path)", errno: errno)
            }
            if n == 0 { break }
            data.append(contentsOf: chunk[0..<n])
        }
        return data
    }

    /// Reads a key file straight into zeroizing memory, or nil when it does not exist.
    ///
    /// A key file is trusted only when it is a regular file owned by this user, readable by nobody else, exactly
    /// `expectedCount` bytes long and not all zeros: a key another user could read or plant, or a blank one, protects
    /// nothing, so it is refused rather than used (and left as found, for the administrator to look at).
    package static func readSecret(_ path: String, expectedCount: Int) throws -> SecureBytes? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        if fd < 0 {
            if errno == ENOENT { return nil }
            throw PrivateFileError("cannot open key file \(path)", errno: errno)
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw PrivateFileError("cannot inspect key file \(path)", errno: errno) }
        guard info.st_mode & S_IFMT == S_IFREG else {
            throw PrivateFileError("key file \(path) is not a regular file", errno: nil)
        }
        guard info.st_uid == geteuid() else {
            throw PrivateFileError("key file \(path) belongs to another user (uid \(info.st_uid))", errno: nil)
        }
        guard info.st_mode & 0o077 == 0 else {
            throw PrivateFileError(
                "key file \(path) is readable or writable by others (mode \(String(info.st_mode & 0o777, radix: 8)));"
                    + " it may have leaked: refusing to use it", errno: nil)
        }
        var secret = SecureBytes(zeros: expectedCount)
        let got = secret.withUnsafeMutableBytes { buffer -> Int in
            var total = 0
            while total < buffer.count {
                let n = Glibc.read(fd, buffer.baseAddress! + total, buffer.count - total)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { break }
                total += n
            }
            return total
        }
        guard got == expectedCount, Int(info.st_size) == expectedCount else {
            throw PrivateFileError("\(path) is not a \(expectedCount)-byte key file", errno: EINVAL)
        }
        let blank = secret.withUnsafeBytes { bytes in bytes.allSatisfy { $0 == 0 } }
        guard !blank else { throw PrivateFileError("key file \(path) is all zeros: refusing to use it", errno: nil) }
        return secret
    }

    /// Replaces `path` with `bytes` atomically, mode 0600: a crash leaves either the old or the new contents.
    ///
    /// The temporary file has an unpredictable name and is created exclusively without following links; the rename
    /// replaces a link at `path` itself rather than writing through it. The file and its directory are flushed to
    /// disk before returning, so the write survives a power loss too.
    package static func writeAtomically(_ bytes: UnsafeRawBufferPointer, to path: String) throws {
        let directory = (path as NSString).deletingLastPathComponent
        let fileName = (path as NSString).lastPathComponent
        var fd: Int32 = -1
        var temporary = ""
        for _ in 0..<8 {
            let digits = Array("0123456789abcdef".utf8)
            let suffix = String(
                decoding: try SecureRandom.bytes(12).flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 15)]] },
                as: UTF8.self)
            temporary = (directory.isEmpty ? "" : directory + "/") + ".\(fileName).\(suffix).tmp"
            fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
            if fd >= 0 || errno != EEXIST { break }
        }
        guard fd >= 0 else { throw PrivateFileError("cannot create a temporary file beside \(path)", errno: errno) }
        var written = 0
        while written < bytes.count {
            let n = write(fd, bytes.baseAddress! + written, bytes.count - written)
            if n < 0 {
                if errno == EINTR { continue }
                let code = errno
                close(fd)
                unlink(temporary)
                throw PrivateFileError("cannot write \(temporary)", errno: code)
            }
            written += n
        }
        if fsync(fd) != 0 {
            let code = errno
            close(fd)
            unlink(temporary)
            throw PrivateFileError("cannot flush \(temporary)", errno: code)
        }
        close(fd)
        if rename(temporary, path) != 0 {
            let code = errno
            unlink(temporary)
            throw PrivateFileError("cannot replace \(path)", errno: code)
        }
        syncDirectory(directory)
    }

    /// Replaces `path` with `data` atomically, mode 0600.
    package static func writeAtomically(_ data: Data, to path: String) throws {
        try data.withUnsafeBytes { try writeAtomically($0, to: path) }
    }

    /// Writes `data` over the start of the regular file `path` (created 0600; never through a link) and cuts it to
    /// that length, in place: no temporary file, no rename, no flush. For small fixed-size records on a hot path
    /// whose readers authenticate what they read (a torn write then fails to authenticate and is treated as
    /// damage); use ``writeAtomically(_:to:)`` for anything else.
    package static func overwrite(_ data: Data, at path: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw PrivateFileError("cannot open \(path)", errno: errno) }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_uid == geteuid() else {
            throw PrivateFileError("\(path) is not a private regular file", errno: nil)
        }
        if info.st_mode & 0o077 != 0 { fchmod(fd, 0o600) }
        let written = data.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        guard written == data.count, ftruncate(fd, off_t(data.count)) == 0 else {
            throw PrivateFileError("cannot write \(path)", errno: errno)
        }
    }

    /// Removes `path`; a missing file is not an error. The directory is synced, so the removal survives a crash.
    package static func remove(_ path: String) throws {
        if unlink(path) != 0 {
            if errno == ENOENT { return }
            throw PrivateFileError("cannot remove \(path)", errno: errno)
        }
        syncDirectory((path as NSString).deletingLastPathComponent)
    }

    /// Runs `body` while holding an exclusive `flock` on `path` (created 0600), so read-modify-write cycles of
    /// several processes sharing one state directory do not interleave.
    package static func withExclusiveLock<Result>(on path: String, _ body: () throws -> Result) throws -> Result {
        let lock = try FileLock(path: path)
        do {
            let result = try body()
            lock.unlock()
            return result
        } catch {
            lock.unlock()
            throw error
        }
    }

    /// Loads the key at `path`, creating it from the system's random generator (mode 0600) when missing and
    /// `mayCreate` allows it.
    ///
    /// Call it while holding ``withExclusiveLock(on:_:)`` on the directory's lock file, so two processes never
    /// create two different keys. - Throws: ``PrivateFileError`` when the key is missing and may not be created,
    /// or is refused by ``readSecret(_:expectedCount:)``.
    package static func loadOrCreateKey(at path: String, byteCount: Int = 32, mayCreate: Bool = true) throws
        -> SecureBytes
    {
        if let key = try readSecret(path, expectedCount: byteCount) { return key }
        guard mayCreate else { throw PrivateFileError("key file \(path) is missing", errno: ENOENT) }
        let key = try SecureBytes(randomCount: byteCount)
        try key.withUnsafeBytes { try writeAtomically($0, to: path) }
        guard let stored = try readSecret(path, expectedCount: byteCount) else {
            throw PrivateFileError("key file \(path) vanished after creation", errno: ENOENT)
        }
        return stored
    }

    private static func syncDirectory(_ directory: String) {
        let directoryFD = open(directory.isEmpty ? "." : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if directoryFD >= 0 {
            _ = fsync(directoryFD)
            close(directoryFD)
        }
    }
}

/// An exclusive `flock` on a file (created 0600, never through a link), held from `init` until ``unlock()`` (or
/// until the value goes away).
// Safe to share: `fd` is only touched under `lock`.
package final class FileLock: @unchecked Sendable {
    private let lock = NSLock()
    private var fd: Int32

    /// Blocks until the lock on `path` is held. - Throws: ``PrivateFileError``.
    package init(path: String) throws {
        fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw PrivateFileError("cannot open lock file \(path)", errno: errno) }
        while flock(fd, LOCK_EX) != 0 {
            guard errno == EINTR else {
                let code = errno
                close(fd)
                throw PrivateFileError("cannot lock \(path)", errno: code)
            }
        }
    }

    private init(holding fd: Int32) { self.fd = fd }

    /// Takes the lock on `path` only if nobody holds it; nil when it is busy.
    package static func attempt(path: String) throws -> FileLock? {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw PrivateFileError("cannot open lock file \(path)", errno: errno) }
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            if errno == EINTR { continue }
            let code = errno
            close(fd)
            if code == EWOULDBLOCK { return nil }
            throw PrivateFileError("cannot lock \(path)", errno: code)
        }
        return FileLock(holding: fd)
    }

    /// Releases the lock; idempotent.
    package func unlock() {
        lock.withLock {
            guard fd >= 0 else { return }
            flock(fd, LOCK_UN)
            close(fd)
            fd = -1
        }
    }

    deinit { unlock() }
}
