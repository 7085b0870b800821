import EmbeddedEngine
import Enclave
import Foundation
import KeychainServices
import SecureCrypto
import SecurityClient
import SecurityServer

#if canImport(Glibc)
    import Glibc
#endif

/// Enclave-key signing on the TPM backend (swtpm started for the run) against the same signature on the software
/// backend and against `tpm2_sign` (tpm2-tools) on a key of the same TPM, in the same run. Wall-clock time, best
/// of three rounds: the work is in swtpm's process (and a tool's), which this thread's CPU time does not see.
///
/// Every TPM signature is a connection of its own: the TPM lock, the left-over flush, the storage root key made
/// from its template, a salted session, the key loaded, `TPM2_Sign`, the flush. `tpm2_sign` is a process per
/// signature that loads a saved key context. A hardware TPM adds its own time per command (see BENCHMARKS.md).
enum TPMBenchmarks {
    static func run() async throws {
        print("== TPM: enclave-key sign on swtpm vs software enclave-key sign vs tpm2_sign (tpm2-tools)")
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/swtpm"),
            FileManager.default.isExecutableFile(atPath: "/usr/bin/tpm2_sign")
        else {
            print("tpm: swtpm or tpm2-tools missing (make bench runs scripts/bootstrap)")
            return
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("la-bench-tpm-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        guard let (swtpm, tcti) = Measure.startSoftwareTPM(in: directory.appendingPathComponent("swtpm").path) else {
            print("tpm: swtpm did not start")
            return
        }
        defer { Measure.stop(swtpm) }

        let onTPM = try signer(directory.appendingPathComponent("tpm"), EnclaveConfiguration(choice: .tpm, tcti: tcti))
        let inSoftware = try signer(directory.appendingPathComponent("software"), .software)
        guard let toolSign = try tpm2Sign(directory: directory.path, tcti: tcti) else {
            print("tpm: tpm2-tools could not make a key on swtpm")
            return
        }
        var tpm = 0.0
        var software = 0.0
        var tools = 0.0
        for _ in 0..<3 {
            tools = max(tools, Measure.opsPerWallSecond { _ = toolSign() })
            tpm = max(tpm, Measure.opsPerWallSecond { _ = onTPM() })
            software = max(software, Measure.opsPerWallSecond { _ = inSoftware() })
        }
        Measure.report(
            "enclave sign on swtpm (SecKeyCreateSignature)", ours: tpm, baseline: tools,
            baselineName: "tpm2_sign, a process per signature", target: ">= 1")
        Measure.report(
            "enclave sign on swtpm (SecKeyCreateSignature)", ours: tpm, baseline: software,
            baselineName: "the same call on the software backend")
        print(
            String(
                format: "tpm: %.2f ms per TPM signature, %.3f ms in software, %.2f ms per tpm2_sign",
                1000 / tpm, 1000 / software, 1000 / tools))
    }

    /// A closure that signs one digest with a new enclave key of a store on `configuration`'s backend.
    private static func signer(_ directory: URL, _ configuration: EnclaveConfiguration) throws -> () -> Bool {
        let engine = try KeychainEngine(directory: directory, enclave: configuration)
        let client = EmbeddedClient(engine: engine, caller: CallerIdentity(accessGroups: ["la-bench"]))
        let parameters: [String: Any] = [
            kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits as String: 256,
            kSecAttrTokenID as String: kSecAttrTokenIDSecureEnclave,
        ]
        let key: SecKey = try KeychainClientSelection.$current.withValue(client) {
            var error: Unmanaged<CFError>?
            guard let key = SecKeyCreateRandomKey(parameters as CFDictionary, &error) else {
                throw error!.takeRetainedValue()
            }
            return key
        }
        let digest = SHA256.hash(Data("la-bench".utf8)) as NSData
        return { SecKeyCreateSignature(key, .ecdsaSignatureDigestX962SHA256, digest, nil) != nil }
    }

    /// tpm2-tools' own path: a P-256 key under a primary made once, its context saved; each call runs `tpm2_sign`.
    private static func tpm2Sign(directory: String, tcti: String) throws -> (() -> Bool)? {
        let files = directory + "/tools"
        try FileManager.default.createDirectory(atPath: files, withIntermediateDirectories: true)
        try Data(SHA256.hash(Data("la-bench".utf8))).write(to: URL(fileURLWithPath: files + "/digest"))
        let steps: [[String]] = [
            ["/usr/bin/tpm2_createprimary", "-T", tcti, "-C", "o", "-G", "ecc256", "-c", files + "/primary.ctx"],
            [
                "/usr/bin/tpm2_create", "-T", tcti, "-C", files + "/primary.ctx", "-G", "ecc256", "-u",
                files + "/key.pub",
                "-r", files + "/key.priv",
            ],
            ["/usr/bin/tpm2_flushcontext", "-T", tcti, "-t"],
            [
                "/usr/bin/tpm2_load", "-T", tcti, "-C", files + "/primary.ctx", "-u", files + "/key.pub", "-r",
                files + "/key.priv", "-c", files + "/key.ctx",
            ],
            ["/usr/bin/tpm2_flushcontext", "-T", tcti, "-t"],
        ]
        for step in steps where Measure.run(step[0], Array(step.dropFirst())) == nil { return nil }
        let sign = [
            "-T", tcti, "-c", files + "/key.ctx", "-g", "sha256", "-d", files + "/digest", "-f", "plain",
            "-o", files + "/signature",
        ]
        guard Measure.run("/usr/bin/tpm2_sign", sign) != nil else { return nil }
        return { Measure.run("/usr/bin/tpm2_sign", sign) != nil }
    }
}
