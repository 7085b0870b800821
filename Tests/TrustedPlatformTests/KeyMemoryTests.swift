import COpenSSL
import Foundation
import SecureCrypto
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Where the private scalar of an enclave key is, read from the memory of a process using the key.
///
/// `keychain-stress hold-key` makes an enclave key, signs with it and waits with its engine open. The test reads
/// every writable mapping of that process (`/proc/<pid>/maps`, `/proc/<pid>/mem`: the test is its parent) and takes
/// every 8-byte-aligned 32-byte window, as a big-endian number and as a little-endian one (OpenSSL keeps a scalar as
/// little-endian 64-bit limbs), for a candidate scalar `d`: the window holds the key when `d · G` is the key's public
/// point. Windows with four or more zero bytes are passed over (a random scalar has that with probability 2·10⁻⁶;
/// pointers, lengths and empty pages always do), the rest are multiplied out.
///
/// On the software backend the scan finds the scalar (the engine opened the key to sign): that is what shows the
/// scan can find one. On the TPM backend the same scan of the same program finds nothing.
@Suite(.enabled(if: SoftwareTPM.isInstalled, "swtpm is not installed (scripts/bootstrap installs it)"))
struct KeyMemoryTests {
    @Test func softwareKeyScalarIsInTheProcessAndATPMKeyScalarIsNot() throws {
        let machine = try SoftwareTPM()
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("key-memory-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: scratch) }
        var found: [String: Int] = [:]
        for (name, environment) in [("software", ["LA_ENCLAVE": "software"]), ("tpm", machine.environment)] {
            let log = scratch.path + "-\(name).log"
            defer { try? FileManager.default.removeItem(atPath: log) }
            let holder = try SpawnedProcess(
                try builtExecutable("keychain-stress").path, ["hold-key", scratch.appendingPathComponent(name).path],
                environment: environment.merging(["LA_DAEMON_SOCKET": ""]) { _, new in new }, log: log)
            defer { _ = holder.stop(SIGKILL) }
            let publicKey = try Self.publicKey(printedIn: log, by: holder)
            found[name] = try ScalarScan(publicKey: publicKey).occurrences(inWritableMemoryOf: holder.pid)
        }
        #expect(found["software", default: 0] > 0, "the scan finds a key that is in memory")
        #expect(found["tpm"] == 0, "no window of a TPM key holder's memory is the key's scalar")
    }

    static func publicKey(printedIn log: String, by holder: SpawnedProcess) throws -> [UInt8] {
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline {
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            if let line = text.split(separator: "\n").first(where: { $0.hasPrefix("public ") }) {
                let hex = Array(line.dropFirst(7).utf8)
                return stride(from: 0, to: hex.count - 1, by: 2).map {
                    UInt8(String(decoding: hex[$0...$0 + 1], as: UTF8.self), radix: 16)!
                }
            }
            guard holder.isRunning else { throw ScanFailure("keychain-stress hold-key failed: \(text)") }
            usleep(50_000)
        }
        throw ScanFailure("keychain-stress hold-key printed no key")
    }
}

struct ScanFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Looks for a P-256 private scalar of one public key in another process's writable memory.
final class ScalarScan {
    private let target: [UInt8]
    private let group: OpaquePointer
    private let point: OpaquePointer
    private let scalar: OpaquePointer
    private let context: OpaquePointer
    private var encoded = [UInt8](repeating: 0, count: 65)

    init(publicKey: [UInt8]) throws {
        guard publicKey.count == 65, let group = EC_GROUP_new_by_curve_name(NID_X9_62_prime256v1),
            let point = EC_POINT_new(group), let scalar = BN_new(), let context = BN_CTX_new()
        else { throw ScanFailure("OpenSSL could not set up P-256") }
        target = publicKey
        self.group = group
        self.point = point
        self.scalar = scalar
        self.context = context
    }

    deinit {
        EC_POINT_free(point)
        BN_free(scalar)
        BN_CTX_free(context)
        EC_GROUP_free(group)
    }

    /// How many windows of `pid`'s writable mappings hold the scalar (either byte order).
    func occurrences(inWritableMemoryOf pid: pid_t) throws -> Int {
        let maps = try String(contentsOfFile: "/proc/\(pid)/maps", encoding: .utf8)
        let memory = open("/proc/\(pid)/mem", O_RDONLY)
        guard memory >= 0 else { throw ScanFailure("cannot open /proc/\(pid)/mem: errno \(errno)") }
        defer { close(memory) }
        var hits = 0
        var bytesRead = 0
        for line in maps.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 2, fields[1].hasPrefix("rw"), !line.hasSuffix("[vvar]"), !line.hasSuffix("[vsyscall]")
            else { continue }
            let bounds = fields[0].split(separator: "-").compactMap { UInt64($0, radix: 16) }
            guard bounds.count == 2 else { continue }
            var buffer = [UInt8](repeating: 0, count: Int(bounds[1] - bounds[0]))
            let count = buffer.withUnsafeMutableBytes {
                pread(memory, $0.baseAddress, $0.count, off_t(Int64(bitPattern: bounds[0])))
            }
            guard count > 0 else { continue }
            bytesRead += count
            hits += buffer.withUnsafeBytes { windows(in: UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
        }
        guard bytesRead > 0 else { throw ScanFailure("read nothing of process \(pid)'s memory") }
        return hits
    }

    private func windows(in bytes: UnsafeRawBufferPointer) -> Int {
        var hits = 0
        var offset = 0
        var window = [UInt8](repeating: 0, count: 32)
        while offset + 32 <= bytes.count {
            var zeros = 0
            for index in 0..<32 where bytes[offset + index] == 0 {
                zeros += 1
                if zeros >= 4 { break }
            }
            if zeros < 4 {
                for index in 0..<32 { window[index] = bytes[offset + index] }
                if isScalar(window) { hits += 1 }
                window.reverse()
                if isScalar(window) { hits += 1 }
            }
            offset += 8
        }
        return hits
    }

    private func isScalar(_ candidate: [UInt8]) -> Bool {
        guard BN_bin2bn(candidate, 32, scalar) != nil,
            EC_POINT_mul(group, point, scalar, nil, nil, context) == 1,
            EC_POINT_point2oct(group, point, POINT_CONVERSION_UNCOMPRESSED, &encoded, 65, context) == 65
        else { return false }
        return encoded == target
    }
}
