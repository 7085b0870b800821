import Authenticators
import Foundation
import KeychainServices
import SecureCrypto
import SecurityClient
import SecurityProtocol
import SecurityServer

#if canImport(Glibc)
    import Glibc
#endif

/// Everything `ChallengeSigning demo` needs instead of a person with a reader: a throwaway store, libfprint's
/// virtual reader, and a passcode service checked by the real PAM library through pam_matrix.
///
/// The program talks to the store, the reader and PAM exactly as it would on a real machine; only where the
/// fingerprints come from differs. This file is the demo's scaffolding, not part of what an app copies: an app
/// uses a real reader and `lactl biometry enroll` (see README, "Examples").
struct DemoEnvironment {
    /// The throwaway directory: the store (`LA_DATA_DIR`), the reader's socket and the PAM files.
    let directory: String
    /// libfprint's virtual reader: a scan sent here is a finger on the reader.
    let reader: VirtualReaderSocket

    /// Creates the directory and points the library at it through its environment variables. Call it before the
    /// first right or keychain call of the process: the library reads its configuration once.
    init() throws {
        var template = Array("/tmp/challenge-signing-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw ExampleError("cannot create a temporary directory") }
        directory = String(cString: made)
        reader = VirtualReaderSocket(path: directory + "/reader.sock")

        // The store: rights, keys and enrolled prints live here and nowhere else.
        setenv("LA_DATA_DIR", directory + "/store", 1)
        // The reader: only libfprint's virtual driver, listening on our socket.
        setenv("FP_DRIVERS_WHITELIST", "virtual_device", 1)
        setenv("FP_VIRTUAL_DEVICE", reader.path, 1)
        setenv("LA_READER_DRIVERS", "virtual_device", 1)
        // The passcode: the real PAM library with pam_matrix and a password file for this run.
        let module = "/usr/lib/x86_64-linux-gnu/pam_wrapper/pam_matrix.so"
        if FileManager.default.fileExists(atPath: module) {
            let user = AuthenticationConfiguration.currentUsername()
            let passdb = directory + "/passdb"
            // No blank lines: pam_matrix stops at them.
            try "\(user):demo-passcode:challenge-signing\n".write(toFile: passdb, atomically: true, encoding: .utf8)
            try "auth required \(module) passdb=\(passdb)\naccount required \(module) passdb=\(passdb)\n"
                .write(toFile: directory + "/challenge-signing", atomically: true, encoding: .utf8)
            setenv("LA_PAM_SERVICE", "challenge-signing", 1)
            setenv("LA_PAM_CONFDIR", directory, 1)
        }
        // No terminal prompts: the demo's presenter follows a script.
        setenv("LA_PRESENTER", "none", 1)
    }

    /// Enrolls a finger whose scans carry `printID` through the engine's enrollment request, after the passcode as
    /// every enrollment needs (in a real setup: `lactl biometry enroll`). Returns the enrolled-set state hash
    /// afterwards.
    func enroll(_ printID: String, finger: Finger) async throws -> Data? {
        let client = try KeychainClientSelection.resolve()
        let context = try await client.passcodeContext(reason: "enroll a finger", presenter: DemoPasscode())
        defer { Task { _ = try? await client.send(.discard(context)) } }
        async let enrolled = client.send(.enroll(finger, context: context))
        try await reader.send(Array(repeating: "SCAN \(printID)", count: 5))
        _ = try await enrolled
        guard case .prints(_, let stateHash) = try await client.send(.enrolledPrints) else { return nil }
        return stateHash
    }

    /// Puts the finger `printID` on the reader once a prompt waits for it.
    func touch(_ printID: String) async throws {
        try await reader.send("SCAN \(printID)")
    }

    /// Closes the reader and removes the directory.
    func remove() async {
        _ = try? await KeychainClientSelection.resolve().send(.closeReader)
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// Types the demo's passcode (pam_matrix's password file holds it) when the engine asks.
struct DemoPasscode: EvaluationPresenter {
    func fingerprintPromptDidBegin(_ prompt: EvaluationPrompt, respond: @escaping @Sendable (PromptAction) -> Void) {
        respond(.cancel)
    }
    func fingerprintPrompt(_ event: FingerprintPromptEvent) {}
    func fingerprintPromptDidEnd() {}
    func passcode(_ prompt: EvaluationPrompt, question: PasscodePrompt) -> SecureBytes? {
        SecureBytes(Array("demo-passcode".utf8))
    }
    func show(_ message: PasscodeMessage) {}
}
