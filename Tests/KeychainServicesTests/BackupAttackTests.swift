import Foundation
import KeychainServices
import SecureCrypto
import SecurityClient
import SecurityProtocol
import SecurityServer
import SwiftKeychain
import Testing

/// Attack review, finding 7: a crafted backup file crashed the importing process (arithmetic overflow in the KDF
/// parameters read from the unauthenticated header), hung it (2^40 PBKDF2 iterations) or took 4 GiB and 24 s
/// (scrypt) before any check. Each crafted case must now end within a second with a clear status, nothing imported.
@Suite("Attack review: crafted backup files")
struct BackupAttackTests {
    static let magic = Data("LABACKUP1\n".utf8)

    /// A backup file with `header` (raw bytes) and `body`, its length field saying `declaredLength` if given.
    static func file(header: Data, body: Data = Data(repeating: 0xA5, count: 64), declaredLength: UInt32? = nil) -> Data
    {
        var out = magic
        withUnsafeBytes(of: (declaredLength ?? UInt32(header.count)).bigEndian) { out.append(contentsOf: $0) }
        out.append(header)
        out.append(body)
        return out
    }

    static func header(_ algorithm: String, cost: String, blockSize: String = "8", parallelism: String = "1") -> Data {
        let salt = Data(repeating: 7, count: 16).base64EncodedString()
        return Data(
            #"{"algorithm":"\#(algorithm)","salt":"\#(salt)","cost":\#(cost),"blockSize":\#(blockSize),"parallelism":\#(parallelism),"outputByteCount":32}"#
                .utf8)
    }

    /// Imports `contents` (written to a file under `directory`) into `client`'s store through the keychain's
    /// import, which reads the file in this process and sends its bytes; the status and how long it took.
    static func importing(_ contents: Data, into client: any SecurityClient, directory: URL, password: String = "pw")
        -> (OSStatus, Duration)
    {
        let path = directory.appendingPathComponent("crafted-\(UUID().uuidString).backup")
        _ = FileManager.default.createFile(atPath: path.path, contents: contents)
        defer { try? FileManager.default.removeItem(at: path) }
        let start = ContinuousClock.now
        let status: OSStatus
        do {
            _ = try Keychain(client: client).importBackup(from: path, password: Data(password.utf8))
            status = errSecSuccess
        } catch let error as KeychainError {
            status = error.status
        } catch {
            status = errSecInternalComponent
        }
        return (status, ContinuousClock.now - start)
    }

    @Test func craftedBackupsEndWithinASecondWithAClearStatus() throws {
        let store = TestStore()
        let client = try store.client()
        try store.with(client) { addGenericPassword(account: "a") }
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent(
            "backup-attack-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }

        // A genuine backup, to truncate and flip.
        let genuinePath = scratch.appendingPathComponent("genuine.backup")
        _ = try Keychain(client: client).exportBackup(to: genuinePath, password: Data("pw".utf8))
        let genuine = try Data(contentsOf: genuinePath)

        var cases: [(String, Data, Set<OSStatus>)] = [
            (
                "scrypt N = UInt64.max", Self.file(header: Self.header("scrypt", cost: "18446744073709551615")),
                [errSecDecode]
            ),
            ("scrypt N = 2^40", Self.file(header: Self.header("scrypt", cost: "1099511627776")), [errSecDecode]),
            (
                "scrypt r·N·p overflowing",
                Self.file(
                    header: Self.header(
                        "scrypt", cost: "1048576", blockSize: "4294967295", parallelism: "4294967295")), [errSecDecode]
            ),
            (
                "scrypt 4 GiB", Self.file(header: Self.header("scrypt", cost: "1048576", blockSize: "32")),
                [errSecDecode]
            ),
            (
                "PBKDF2 2^40 iterations", Self.file(header: Self.header("pbkdf2-sha256", cost: "1099511627776")),
                [errSecDecode]
            ),
            (
                "header length 0xFFFFFFFF",
                Self.file(header: Self.header("scrypt", cost: "32768"), declaredLength: .max),
                [errSecDecode]
            ),
            ("header not JSON", Self.file(header: Data("{garbage".utf8)), [errSecDecode]),
            ("empty file", Data(), [errSecDecode]),
            ("wrong password", genuine, [errSecAuthFailed]),
        ]
        for length in [5, Self.magic.count + 2, Self.magic.count + 4 + 10, genuine.count / 2, genuine.count - 1] {
            cases.append(("truncated to \(length) bytes", genuine.prefix(length), [errSecDecode, errSecAuthFailed]))
        }
        let headerLength = genuine[Self.magic.count..<Self.magic.count + 4].reduce(0) { $0 << 8 | Int($1) }
        for position in stride(from: Self.magic.count + 4, to: Self.magic.count + 4 + headerLength, by: 9) {
            var flipped = genuine
            flipped[position] ^= 0x10
            cases.append(("header bit flipped at \(position)", flipped, [errSecDecode, errSecAuthFailed]))
        }
        for (name, contents, expected) in cases {
            let (status, elapsed) = Self.importing(
                contents, into: client, directory: scratch, password: name == "wrong password" ? "not pw" : "pw")
            #expect(expected.contains(status), "\(name): \(status)")
            // The costly headers would take minutes and gigabytes if honoured; 10 s tells that apart on any load.
            #expect(elapsed < .seconds(10), "\(name) took \(elapsed)")
        }
        // Nothing was imported: the one item is still the only one.
        try store.with(client) { #expect(genericPasswordCount() == 1) }
        // The genuine backup still imports (into a fresh store), so the checks refuse only what they should.
        let other = TestStore()
        let fresh = try other.client()
        #expect(Self.importing(genuine, into: fresh, directory: scratch).0 == errSecSuccess)
        try other.with(fresh) { #expect(password(account: "a") == .success("secret")) }
    }

    /// A file larger than any backup the keychain writes is refused before it is read.
    @Test func anOversizedFileIsRefusedUnread() throws {
        let store = TestStore()
        let client = try store.client()
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("huge-\(UUID().uuidString).backup")
        _ = FileManager.default.createFile(atPath: path.path, contents: Self.magic)
        defer { try? FileManager.default.removeItem(at: path) }
        let handle = try FileHandle(forWritingTo: path)
        try handle.truncate(atOffset: 2 << 30)  // sparse: no disk used
        try handle.close()
        let start = ContinuousClock.now
        #expect(throws: KeychainError(status: errSecDecode)) {
            _ = try Keychain(client: client).importBackup(from: path, password: Data("pw".utf8))
        }
        #expect(ContinuousClock.now - start < .seconds(10))
    }

    /// Finding 10 for exports: a link planted at the name the old code used for its temporary file (and at the
    /// backup's own name) is never written through.
    @Test func exportNeverWritesThroughAPlantedLink() throws {
        let store = TestStore()
        let client = try store.client()
        try store.with(client) { addGenericPassword(account: "a") }
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("backup-links-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let victim = scratch.appendingPathComponent("victim")
        try Data("victim".utf8).write(to: victim)
        let file = scratch.appendingPathComponent("out.backup")
        symlink(victim.path, scratch.appendingPathComponent(".out.backup.\(getpid()).tmp").path)
        symlink(victim.path, file.path)
        _ = try Keychain(client: client).exportBackup(to: file, password: Data("pw".utf8))
        #expect(try Data(contentsOf: victim) == Data("victim".utf8))
        var info = stat()
        #expect(lstat(file.path, &info) == 0)
        #expect(info.st_mode & S_IFMT == S_IFREG)
        #expect(info.st_mode & 0o777 == 0o600)
    }
}

#if canImport(Glibc)
    import Glibc
#endif
