import Authenticators
import EmbeddedEngine
import Foundation
import KeychainServices
import SecurityClient
import SecurityProtocol
import SecurityServer
import Synchronization
import TestSupport
import Testing

/// A store in a fresh temporary directory, removed when the value goes away. Embedded (the default ``TestMode``),
/// every client opens its own engine on it; in daemon mode every client is a connection to one `localauthd` of the
/// store's own, with no reader and no passcode service (only lists that need no authentication are satisfied).
final class KeyTestStore: Sendable {
    let directory: URL
    private let daemon: StoreDaemon

    init() {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "seckey-test-\(UUID().uuidString)")
        self.directory = directory
        daemon = StoreDaemon {
            try TestEngine(
                storeDirectory: directory, scratch: directory.path + "-daemon",
                authentication: Self.contextAuthentication(directory))
        }
    }

    deinit {
        daemon.stop()
        forgetUnlockedKeys(ofStoreIn: directory)
        try? FileManager.default.removeItem(at: directory)
        try? FileManager.default.removeItem(atPath: directory.path + "-daemon")
    }

    /// A client over a new engine on this store that refuses every list needing an authentication (embedded), or a
    /// connection to the store's daemon, which can check none.
    func client() throws -> any SecurityClient {
        try client(evaluator: NoCredentialEvaluator())
    }

    /// A client over a new engine on this store, deciding access control with `evaluator`. Embedded only: a test
    /// that injects an evaluator is `.embeddedOnly`.
    func client(evaluator: any AccessControlEvaluator) throws -> any SecurityClient {
        if let running = try daemon.engine() {
            guard evaluator is NoCredentialEvaluator else {
                throw KeychainStatus(.unimplemented, "an injected evaluator needs an embedded engine")
            }
            return try running.client(accessGroups: ["test.keys"])
        }
        let engine = try KeychainEngine(directory: directory, evaluator: evaluator)
        return EmbeddedClient(engine: engine, caller: CallerIdentity(accessGroups: ["test.keys"]))
    }

    /// No fingerprint reader, no passcode service.
    private static func contextAuthentication(_ directory: URL) -> AuthenticationConfiguration {
        AuthenticationConfiguration(
            stateDirectory: directory.appendingPathComponent("state").path, username: "nobody",
            passcode: .init(service: "absent-service", configurationDirectory: directory.path),
            readerDrivers: ["no_such_driver"])
    }

    /// A client over a new engine on this store whose evaluator checks authentication contexts (no fingerprint
    /// reader, no passcode service: only lists that need no authentication are satisfied); in daemon mode a
    /// connection to the store's daemon, configured the same way.
    func contextClient() throws -> any SecurityClient {
        if let engine = try daemon.engine() { return try engine.client(accessGroups: ["test.keys"]) }
        let engine = try KeychainEngine(directory: directory, authentication: Self.contextAuthentication(directory))
        return EmbeddedClient(engine: engine, caller: CallerIdentity(accessGroups: ["test.keys"]))
    }

    /// Runs `body` with the SecItem and SecKey functions bound to `client`.
    @discardableResult
    func with<T>(_ client: any SecurityClient, _ body: () throws -> T) throws -> T {
        try KeychainClientSelection.$current.withValue(client) { try body() }
    }

    /// Runs `body` with the functions bound to a new client using `evaluator`.
    @discardableResult
    func with<T>(evaluator: any AccessControlEvaluator = NoCredentialEvaluator(), _ body: () throws -> T) throws -> T {
        try with(try client(evaluator: evaluator), body)
    }
}

/// An evaluator that allows every operation and records what it was asked: a credential that satisfies every list.
final class AllowingEvaluator: AccessControlEvaluator {
    struct Call: Equatable {
        var operation: AccessControlOperation
        var context: AuthenticationContextID?
    }

    private let recorded = Mutex<[Call]>([])

    var calls: [Call] { recorded.withLock { $0 } }

    func authorize(
        _ policy: AccessControlPolicy, operation: AccessControlOperation, authenticationUI: AuthenticationUI,
        context: AuthenticationContextID?, prompting: Prompting
    ) -> AccessDecision {
        recorded.withLock { $0.append(Call(operation: operation, context: context)) }
        return .allowed
    }
}

/// Thrown by the helpers below with the `OSStatus` a `SecKey` function reported.
struct SecKeyFailure: Error, Equatable {
    var status: Int
}

/// `body`'s result, or the status of the `CFError` it reported.
func secKeyCall<T>(_ body: (UnsafeMutablePointer<Unmanaged<CFError>?>) -> T?) -> Result<T, SecKeyFailure> {
    var error: Unmanaged<CFError>?
    if let value = body(&error) { return .success(value) }
    let status = error.map { $0.takeRetainedValue().code } ?? 0
    return .failure(SecKeyFailure(status: status))
}

/// The status a failing `SecKey` call reported (0 when it succeeded).
func failureStatus<T>(_ body: (UnsafeMutablePointer<Unmanaged<CFError>?>) -> T?) -> Int {
    if case .failure(let failure) = secKeyCall(body) { return failure.status }
    return 0
}

/// `SecKeyCreateRandomKey` parameters for a P-256 key.
func keyParameters(
    enclave: Bool = false, permanent: Bool = false, tag: Data? = nil, accessControl: SecAccessControl? = nil,
    extra: [String: Any] = [:]
) -> [String: Any] {
    var privateAttributes: [String: Any] = [kSecAttrIsPermanent as String: permanent]
    if let tag { privateAttributes[kSecAttrApplicationTag as String] = tag }
    if let accessControl { privateAttributes[kSecAttrAccessControl as String] = accessControl }
    var parameters: [String: Any] = [
        kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits as String: 256,
        kSecPrivateKeyAttrs as String: privateAttributes,
    ]
    if enclave { parameters[kSecAttrTokenID as String] = kSecAttrTokenIDSecureEnclave }
    parameters.merge(extra) { _, new in new }
    return parameters
}

/// A new key, or the test fails with the reported status.
func makeKey(_ parameters: [String: Any]) throws -> SecKey {
    try secKeyCall { SecKeyCreateRandomKey(parameters as CFDictionary, $0) }.get()
}

/// An access-control list that needs user presence for private-key use.
func userPresenceACL() throws -> SecAccessControl {
    try #require(
        SecAccessControlCreateWithFlags(
            nil, kSecAttrAccessibleWhenUnlockedThisDeviceOnly, [.privateKeyUsage, .userPresence], nil))
}

/// The engine status `body` failed with, or nil when it succeeded.
func statusCode(_ body: () throws -> Any) -> KeychainStatus.Code? {
    do {
        _ = try body()
        return nil
    } catch {
        return (error as? KeychainStatus)?.code ?? KeychainStatus.Code(rawValue: 1)
    }
}

/// The 65-byte external representation of `key`'s public key.
func publicKeyBytes(_ key: SecKey) throws -> Data {
    let publicKey = try #require(SecKeyCopyPublicKey(key))
    return try #require(SecKeyCopyExternalRepresentation(publicKey, nil) as Data?)
}
