import COpenSSL
import Enclave
import Foundation
import SecureCrypto

/// Unlocking a passcode-protected keychain (issue "Locked means locked") against raw OpenSSL scrypt with the same
/// parameters, in the same run: the passcode layer is scrypt (N = 2^15, r = 8, p = 1: 32 MiB), HKDF, five AES-GCM
/// opens, the keys stored where unlocked keys live (the kernel keyring for embedded clients, the process for
/// localauthd) and the state file written; on the TPM backend also the unseal of the dictionary-attack-protected
/// object (swtpm started for the run). Wall-clock milliseconds, best of five (the scrypt is the cost, and a guess
/// costs an attacker the same). Target: an unlock within 300 ms.
enum UnlockBenchmarks {
    static let passcode = SecureBytes(Array("correct horse battery staple".utf8))

    static func run() async throws {
        print("== unlock: passcode-protected keychain vs raw OpenSSL scrypt (N=2^15, r=8, p=1), best of 5, ms")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("la-bench-unlock-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }

        let salt = try SecureRandom.bytes(16)
        let baseline = bestMilliseconds { _ = rawScrypt(salt: salt) }
        var configurations: [(String, EnclaveConfiguration)] = []
        var embedded = EnclaveConfiguration.software
        embedded.unlockedKeys = .kernelKeyring
        configurations.append(("software backend, kernel keyring (embedded)", embedded))
        var daemon = EnclaveConfiguration.software
        daemon.unlockedKeys = .processMemory
        configurations.append(("software backend, process memory (localauthd)", daemon))
        var swtpm: pid_t?
        if FileManager.default.isExecutableFile(atPath: "/usr/bin/swtpm"),
            let (pid, tcti) = Measure.startSoftwareTPM(in: directory.appendingPathComponent("swtpm").path)
        {
            swtpm = pid
            var onTPM = EnclaveConfiguration(choice: .tpm, tcti: tcti)
            onTPM.unlockedKeys = .processMemory
            configurations.append(("TPM backend on swtpm (DA-protected object)", onTPM))
        } else {
            print("unlock: swtpm missing or did not start; the TPM row is left out")
        }
        defer { if let swtpm { Measure.stop(swtpm) } }

        print(String(format: "raw OpenSSL scrypt: %.1f ms", baseline))
        for (index, (name, configuration)) in configurations.enumerated() {
            let enclave = try Enclave(
                directory: directory.appendingPathComponent("store-\(index)"), configuration: configuration)
            try enclave.unlock(passcode: passcode)  // protects the store: later unlocks open the sealed layer
            let ours = try bestMilliseconds {
                try enclave.lock()
                try enclave.unlock(passcode: passcode)
            }
            let verdict = ours <= 300 ? "within" : "OVER"
            print(
                String(
                    format: "unlock, %@: %.1f ms, %.2f× raw scrypt (target <= 300 ms: %@)", name, ours, ours / baseline,
                    verdict))
        }
    }

    /// The best wall-clock time of five runs of `body`, in milliseconds.
    static func bestMilliseconds(_ body: () throws -> Void) rethrows -> Double {
        var best = Double.infinity
        for _ in 0..<5 {
            let start = DispatchTime.now().uptimeNanoseconds
            try body()
            best = min(best, Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6)
        }
        return best
    }

    /// scrypt straight through OpenSSL (`EVP_PBE_scrypt`), the passcode layer's parameters.
    static func rawScrypt(salt: Data) -> Bool {
        var output = [UInt8](repeating: 0, count: 32)
        let done = passcode.withUnsafeBytes { pass in
            salt.withUnsafeBytes { salt in
                EVP_PBE_scrypt(
                    pass.baseAddress?.assumingMemoryBound(to: CChar.self), pass.count,
                    salt.baseAddress?.assumingMemoryBound(to: UInt8.self), salt.count, 1 << 15, 8, 1, 64 << 20,
                    &output, output.count)
            }
        }
        return done == 1
    }
}
