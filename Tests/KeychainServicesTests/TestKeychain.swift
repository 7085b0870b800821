import Authenticators
import EmbeddedEngine
import Foundation
import KeychainServices
import SecureCrypto
import SecurityClient
import SecurityProtocol
import SecurityServer
import SwiftKeychain
import Synchronization
import TestSupport
import Testing

/// A store in a fresh temporary directory, removed when the value goes away; clients for callers of it. Embedded
/// (the default ``TestMode``), every client opens its own engine on the store, as separate programs do; in daemon
/// mode every client is a connection to one `localauthd` of the store's own, which checks the current user's
/// passcode (`secret`) through pam_matrix.
final class TestStore: Sendable {
    let directory: URL
    private let daemon: StoreDaemon

    init() {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "keychain-test-\(UUID().uuidString)")
        self.directory = directory
        daemon = StoreDaemon {
            try TestEngine(
                storeDirectory: directory, scratch: directory.path + "-daemon",
                authentication: try Self.passcodeAuthentication(directory))
        }
    }

    deinit {
        daemon.stop()
        forgetUnlockedKeys(ofStoreIn: directory)
        try? FileManager.default.removeItem(at: directory)
        try? FileManager.default.removeItem(atPath: directory.path + "-pam")
        try? FileManager.default.removeItem(atPath: directory.path + "-daemon")
    }

    /// Where `keychain-stress` finds the store: its directory (embedded), `socket:PATH` of its daemon.
    var stressTarget: String {
        if let daemon = (try? daemon.engine())?.daemon { return "socket:" + daemon.socket }
        return directory.path
    }

    /// The directory holding the store's files: `directory` embedded, the daemon's directory for this uid.
    var storeDirectory: URL {
        (try? daemon.engine())?.storeDirectory ?? directory
    }

    /// Changes the current user's passcode in pam_matrix's file, as `passwd` would; nil removes the user (PAM then
    /// says the account is unknown: its passcode is gone).
    func setPasscode(_ passcode: String?) throws {
        let user = AuthenticationConfiguration.currentUsername()
        try MatrixPAM.writeService(
            "keychain-test", in: directory.path + "-pam", users: [passcode.map { (user, $0) } ?? ("someone-else", "x")])
    }

    /// The current user's passcode `secret` through pam_matrix, and no reader, for the store in `directory`.
    private static func passcodeAuthentication(_ directory: URL) throws -> AuthenticationConfiguration {
        let user = AuthenticationConfiguration.currentUsername()
        let pamDirectory = directory.path + "-pam"
        try FileManager.default.createDirectory(atPath: pamDirectory, withIntermediateDirectories: true)
        // Written once: a passcode set later (`setPasscode`) stays for the store's next clients.
        if !FileManager.default.fileExists(atPath: pamDirectory + "/passdb") {
            try MatrixPAM.writeService("keychain-test", in: pamDirectory, users: [(user, "secret")])
        }
        return AuthenticationConfiguration(
            stateDirectory: directory.path, username: user,
            passcode: .init(service: "keychain-test", configurationDirectory: pamDirectory),
            readerDrivers: ["no_such_driver"])
    }

    /// A new client for a caller holding `groups`: its own engine (embedded), a new connection (daemon mode).
    func client(groups: [String] = ["test.app"], allGroups: Bool = false) throws -> any SecurityClient {
        if let engine = try daemon.engine() { return try engine.client(accessGroups: groups, allGroups: allGroups) }
        return try EmbeddedClient(
            configuration: EmbeddedConfiguration(
                dataDirectory: directory, accessGroups: groups, mayAccessAllGroups: allGroups))
    }

    /// A client whose engine checks the current user's passcode (`secret`) through pam_matrix, asking `presenter`
    /// (by default one that answers `secret`) for it.
    func passcodeClient(
        groups: [String] = ["test.app"], presenter: any EvaluationPresenter = PasscodeAnswers("secret")
    ) throws -> any SecurityClient {
        if let engine = try daemon.engine() { return try engine.client(accessGroups: groups, presenter: presenter) }
        return try EmbeddedClient(
            configuration: EmbeddedConfiguration(dataDirectory: directory, accessGroups: groups),
            authentication: try Self.passcodeAuthentication(directory), defaultPresenter: presenter)
    }

    /// Another caller (holding `groups`) of the engine `client` talks to: a client of the same embedded engine, or
    /// another connection to the daemon.
    func sibling(of client: any SecurityClient, groups: [String]) throws -> any SecurityClient {
        if let engine = try daemon.engine() { return try engine.client(accessGroups: groups) }
        let embedded = try #require(client as? EmbeddedClient)
        return EmbeddedClient(engine: embedded.engine, caller: CallerIdentity(accessGroups: groups))
    }

    /// Runs `body` with the SecItem functions bound to `client`.
    @discardableResult
    func with<T>(_ client: any SecurityClient, _ body: () throws -> T) throws -> T {
        try KeychainClientSelection.$current.withValue(client) { try body() }
    }

    /// Runs `body` with the SecItem functions bound to a new client for `groups`.
    @discardableResult
    func with<T>(groups: [String] = ["test.app"], _ body: () throws -> T) throws -> T {
        try with(try client(groups: groups), body)
    }
}

/// `SecItemCopyMatching` returning status and result.
func copyMatching(_ query: [String: Any]) -> (OSStatus, CFTypeRef?) {
    var result: CFTypeRef?
    let status = SecItemCopyMatching(query as CFDictionary, &result)
    return (status, result)
}

/// `SecItemAdd` of a generic password.
@discardableResult
func addGenericPassword(
    account: String, service: String = "svc", password: String = "secret", extra: [String: Any] = [:]
) -> OSStatus {
    var query: [String: Any] = [
        kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: account,
        kSecAttrService as String: service, kSecValueData as String: Data(password.utf8),
    ]
    query.merge(extra) { _, new in new }
    return SecItemAdd(query as CFDictionary, nil)
}

/// The password stored for `account`, or the status that prevented reading it.
func password(account: String, service: String = "svc", extra: [String: Any] = [:]) -> Result<String, StatusError> {
    var query: [String: Any] = [
        kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: account,
        kSecAttrService as String: service, kSecReturnData as String: true,
    ]
    query.merge(extra) { _, new in new }
    let (status, result) = copyMatching(query)
    guard status == errSecSuccess else { return .failure(StatusError(status: status)) }
    guard let data = result as? Data else { return .failure(StatusError(status: 1)) }
    return .success(String(decoding: data, as: UTF8.self))
}

struct StatusError: Error, Equatable {
    var status: OSStatus
}

/// The number of generic passwords the current caller sees.
func genericPasswordCount(_ extra: [String: Any] = [:]) -> Int {
    var query: [String: Any] = [
        kSecClass as String: kSecClassGenericPassword, kSecMatchLimit as String: kSecMatchLimitAll,
        kSecReturnAttributes as String: true,
    ]
    query.merge(extra) { _, new in new }
    let (status, result) = copyMatching(query)
    return status == errSecSuccess ? ((result as? [Any])?.count ?? -1) : 0
}

/// A presenter that answers passcode questions from a list (nil = cancel; an exhausted list cancels) and counts
/// the questions, i.e. the PAM transactions that reached the conversation.
final class PasscodeAnswers: EvaluationPresenter {
    private let answers: Mutex<[String?]>
    private let asked = Mutex(0)

    init(_ answers: String?...) { self.answers = Mutex(answers) }
    init(_ answers: [String?]) { self.answers = Mutex(answers) }

    /// How many passcode questions were asked.
    var questionCount: Int { asked.withLock { $0 } }

    func fingerprintPromptDidBegin(_ prompt: EvaluationPrompt, respond: @escaping @Sendable (PromptAction) -> Void) {
        respond(.cancel)
    }
    func fingerprintPrompt(_ event: FingerprintPromptEvent) {}
    func fingerprintPromptDidEnd() {}
    func passcode(_ prompt: EvaluationPrompt, question: PasscodePrompt) -> SecureBytes? {
        asked.withLock { $0 += 1 }
        let answer = answers.withLock { $0.isEmpty ? nil : $0.removeFirst() }
        return answer.map { SecureBytes(Array($0.utf8)) }
    }
    func show(_ message: PasscodeMessage) {}
}
