import Foundation
import KeychainServices
import SecureCrypto
import SecurityClient
import SecurityServer

/// Signing with an enclave key through the whole path (`SecKeyCreateSignature` → client → engine → access-control
/// check → enclave → OpenSSL) against raw OpenSSL ECDSA on a P-256 key in this process, in the same run.
enum SecKeyBenchmarks {
    /// Alternates baseline and ours in short rounds and keeps each side's best round (see `CryptoBenchmarks`).
    static func run() async throws {
        print("== SecKey: enclave-key sign (SecKeyCreateSignature, embedded engine) vs raw OpenSSL ECDSA P-256 sign")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("la-bench-seckey-\(UUID())")
        defer { try? FileManager.default.removeItem(at: directory) }
        let engine = try KeychainEngine(directory: directory)
        let client = EmbeddedClient(engine: engine, caller: CallerIdentity(accessGroups: ["la-bench"]))
        // A key without an access-control list: the engine's default evaluator (no authentication contexts here)
        // satisfies none, so this measures the path a key takes once its use is authorized.
        let parameters: [String: Any] = [
            kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits as String: 256,
            kSecAttrTokenID as String: kSecAttrTokenIDSecureEnclave,
        ]
        let enclaveKey = try KeychainClientSelection.$current.withValue(client) {
            var error: Unmanaged<CFError>?
            guard let key = SecKeyCreateRandomKey(parameters as CFDictionary, &error) else {
                throw error!.takeRetainedValue()
            }
            return key
        }
        let digest = SHA256.hash(Data("la-bench".utf8)) as NSData
        guard SecKeyCreateSignature(enclaveKey, .ecdsaSignatureDigestX962SHA256, digest, nil) != nil else {
            print("seckey: the enclave key does not sign")
            return
        }
        let rawKey = try P256.PrivateKey()
        let rawDigest = digest as Data

        var ours = 0.0
        var baseline = 0.0
        for _ in 0..<3 {
            baseline = max(baseline, try Measure.opsPerSecond(seconds: 1) { _ = try rawKey.signature(forDigest: rawDigest) })
            ours = max(
                ours,
                Measure.opsPerSecond(seconds: 1) {
                    _ = SecKeyCreateSignature(enclaveKey, .ecdsaSignatureDigestX962SHA256, digest, nil)
                })
        }
        Measure.report(
            "enclave sign (p256, authorized)", ours: ours, baseline: baseline, baselineName: "raw OpenSSL sign",
            target: ">= 0.8")
    }
}
