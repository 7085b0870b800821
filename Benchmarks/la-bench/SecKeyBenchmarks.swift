import Authenticators
import EmbeddedEngine
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
        // The engine's context-aware evaluator decides each operation; no reader and no passcode service here.
        let authentication =
            (AuthenticationConfiguration(
                stateDirectory: directory.appendingPathComponent("state").path, username: "la-bench",
                passcode: .init(service: "la-bench-none", configurationDirectory: directory.path),
                readerDrivers: ["no_such_driver"]))
        let engine = try KeychainEngine(directory: directory, authentication: authentication)
        let client = EmbeddedClient(engine: engine, caller: CallerIdentity(accessGroups: ["la-bench"]))
        // `.privateKeyUsage` alone: the list is checked on every signature and is satisfied without a prompt,
        // which is the work a key does once its use is authorized.
        guard
            let access = SecAccessControlCreateWithFlags(
                nil, kSecAttrAccessibleWhenUnlockedThisDeviceOnly, .privateKeyUsage, nil)
        else { return }
        func makeKey(_ privateAttributes: [String: Any]) throws -> SecKey {
            let parameters: [String: Any] = [
                kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits as String: 256,
                kSecAttrTokenID as String: kSecAttrTokenIDSecureEnclave,
                kSecPrivateKeyAttrs as String: privateAttributes,
            ]
            return try KeychainClientSelection.$current.withValue(client) {
                var error: Unmanaged<CFError>?
                guard let key = SecKeyCreateRandomKey(parameters as CFDictionary, &error) else {
                    throw error!.takeRetainedValue()
                }
                return key
            }
        }
        let checkedKey = try makeKey([kSecAttrAccessControl as String: access])
        let uncheckedKey = try makeKey([:])
        let digest = SHA256.hash(Data("la-bench".utf8)) as NSData
        for key in [checkedKey, uncheckedKey]
        where SecKeyCreateSignature(key, .ecdsaSignatureDigestX962SHA256, digest, nil) == nil {
            print("seckey: an enclave key does not sign")
            return
        }
        let rawKey = try P256.PrivateKey()
        let rawDigest = digest as Data

        var checked = 0.0
        var unchecked = 0.0
        var baseline = 0.0
        for _ in 0..<3 {
            baseline = max(
                baseline, try Measure.opsPerSecond(seconds: 1) { _ = try rawKey.signature(forDigest: rawDigest) })
            checked = max(
                checked,
                Measure.opsPerSecond(seconds: 1) {
                    _ = SecKeyCreateSignature(checkedKey, .ecdsaSignatureDigestX962SHA256, digest, nil)
                })
            unchecked = max(
                unchecked,
                Measure.opsPerSecond(seconds: 1) {
                    _ = SecKeyCreateSignature(uncheckedKey, .ecdsaSignatureDigestX962SHA256, digest, nil)
                })
        }
        Measure.report(
            "enclave sign (p256, access control satisfied)", ours: checked, baseline: baseline,
            baselineName: "raw OpenSSL sign", target: ">= 0.8")
        Measure.report(
            "enclave sign (p256, no access-control list)", ours: unchecked, baseline: baseline,
            baselineName: "raw OpenSSL sign", target: ">= 0.8")
    }
}
