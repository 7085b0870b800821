import Foundation
import SecureCrypto

#if canImport(Glibc)
import Glibc
#endif

/// Small POSIX file operations for private state: directories 0700, files 0600, writes that are atomic on
/// crash (temporary file, `fsync`, `rename`, `fsync` of the directory), and advisory locks.
package enum PrivateFiles {
    /// Creates `path` and its missing parents with mode 0700; an existing directory gets its mode tightened to
    /// 0700 when it is ours. - Throws: `AuthenticationError` when it cannot.
    package static func ensureDirectory(_ path: String) throws {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) {
            guard isDirectory.boolValue else {
                throw failure("\(path) exists and is not a directory", errno: ENOTDIR)
            }
        } else {
            do {
                try FileManager.default.createDirectory(
                    atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            } catch {
                throw failure("cannot create directory \(path)", errno: errno)
            }
        }
        var info = stat()
        if stat(path, &info) == 0, info.st_uid == geteuid(), info.st_mode & 0o077 != 0 {
            _ = chmod(path, 0o700)
        }
    }

    /// The contents of `path`, or nil when it does not exist. - Throws: on any other read error.
    package static func read(_ path: String) throws -> Data? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        if fd < 0 {
            if errno == ENOENT { return nil }
            throw failure("cannot open \(path)", errno: errno)
        }
        defer { close(fd) }
        var data = Data()
        var chunk = [UInt8](repeating: 0, count: 16384)
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw failure("cannot read \(path)", errno: errno)
            }
            if n == 0 { break }
            data.append(contentsOf: chunk[0..<n])
        }
        return data
    }

    /// Reads a secret file (a key) straight into zeroizing memory, or nil when it does not exist.
    package static func readSecret(_ path: String, expectedCount: Int) throws -> SecureBytes? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        if fd < 0 {
            if errno == ENOENT { return nil }
            throw failure("cannot open \(path)", errno: errno)
        }
        defer { close(fd) }
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
        guard got == expectedCount else {
            throw failure("\(path) is not a \(expectedCount)-byte key file", errno: EINVAL)
        }
        return secret
    }

    /// Replaces `path` with `bytes` atomically, mode 0600: a crash leaves either the old or the new contents.
    package static func writeAtomically(_ bytes: UnsafeRawBufferPointer, to path: String) throws {
        let directory = (path as NSString).deletingLastPathComponent
        let temporary = path + ".tmp-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw failure("cannot create \(temporary)", errno: errno) }
        var written = 0
        while written < bytes.count {
            let n = write(fd, bytes.baseAddress! + written, bytes.count - written)
            if n < 0 {
                if errno == EINTR { continue }
                let code = errno
                close(fd)
                unlink(temporary)
                throw failure("cannot write \(temporary)", errno: code)
            }
            written += n
        }
        if fsync(fd) != 0 {
            let code = errno
            close(fd)
            unlink(temporary)
            throw failure("cannot flush \(temporary)", errno: code)
        }
        close(fd)
        if rename(temporary, path) != 0 {
            let code = errno
            unlink(temporary)
            throw failure("cannot replace \(path)", errno: code)
        }
        let directoryFD = open(directory.isEmpty ? "." : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if directoryFD >= 0 {
            _ = fsync(directoryFD)
            close(directoryFD)
        }
    }

    /// Replaces `path` with `data` atomically, mode 0600.
    package static func writeAtomically(_ data: Data, to path: String) throws {
        try data.withUnsafeBytes { try writeAtomically($0, to: path) }
    }

    /// Removes `path`; a missing file is not an error.
    package static func remove(_ path: String) throws {
        if unlink(path) != 0 && errno != ENOENT {
            throw failure("cannot remove \(path)", errno: errno)
        }
    }

    /// Runs `body` while holding an exclusive `flock` on `path` (created 0600), so read-modify-write cycles of
    /// several processes sharing one state directory do not interleave.
    package static func withExclusiveLock<Result>(on path: String, _ body: () throws -> Result) throws -> Result {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw failure("cannot open lock file \(path)", errno: errno) }
        defer { close(fd) }
        while flock(fd, LOCK_EX) != 0 {
            if errno != EINTR { throw failure("cannot lock \(path)", errno: errno) }
        }
        defer { flock(fd, LOCK_UN) }
        return try body()
    }

    /// Loads the key at `path`, creating it from the system's random generator (mode 0600) when missing.
    ///
    /// Call it while holding ``withExclusiveLock(on:_:)`` on the directory's lock file, so two processes never
    /// create two different keys.
    package static func loadOrCreateKey(at path: String, byteCount: Int = 32) throws -> SecureBytes {
        if let key = try readSecret(path, expectedCount: byteCount) { return key }
        let key = try SecureBytes(randomCount: byteCount)
        try key.withUnsafeBytes { try writeAtomically($0, to: path) }
        guard let stored = try readSecret(path, expectedCount: byteCount) else {
            throw failure("key file \(path) vanished after creation", errno: ENOENT)
        }
        return stored
    }

    static func failure(_ message: String, errno code: Int32) -> AuthenticationError {
        AuthenticationError(
            .invalidContext, "\(message): \(String(cString: strerror(code)))",
            backendStatus: .init(library: "system", code: Int(code)))
    }
}

/// Where authenticator state lives by default: `$LA_DATA_DIR`, else `$XDG_DATA_HOME/local-authentication`, else
/// `~/.local/share/local-authentication`, as the architecture's embedded mode lays out.
package func defaultAuthenticatorStateDirectory() -> String {
    let environment = ProcessInfo.processInfo.environment
    // The same directory the keychain engine uses, so `lactl biometry` and the engine see the same prints.
    if let directory = environment["LA_DATA_DIR"], !directory.isEmpty {
        return directory
    }
    if let data = environment["XDG_DATA_HOME"], data.hasPrefix("/") {
        return data + "/local-authentication"
    }
    let home = environment["HOME"] ?? NSHomeDirectory()
    return home + "/.local/share/local-authentication"
}
