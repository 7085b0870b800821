import Authenticators
import Foundation
import KeychainServices
import LocalAuthentication
import SecureCrypto
import SecurityClient
import SecurityServer

/// What `LAContext.evaluatePolicy` adds beyond the authenticator itself: `.deviceOwnerAuthentication` answered
/// with the passcode through pam_matrix (no fingerprint enrolled, so it goes straight to PAM), against
/// `PasscodeAuthenticator.authenticate` on the same PAM service in the same run. The difference is the context
/// layer: the client request, the engine's context record, the evaluation task and its executor hops, the
/// presenter adapter, recording the credential and the keychain-unlock hook. Target: at most 1 ms per evaluation.
enum ContextBenchmarks {
    /// A presenter that always answers the bench user's passcode.
    struct BenchPresenter: AuthenticationPresenter {
        func fingerprintPromptDidBegin(
            _ prompt: AuthenticationPrompt, respond: @escaping @Sendable (AuthenticationPromptAction) -> Void
        ) {}
        func passcode(for prompt: AuthenticationPrompt, question: PasscodeQuestion) -> AuthenticationSecret? {
            AuthenticationSecret(copying: Array("secret".utf8))
        }
    }

    static func run() async throws {
        print("== LAContext.evaluatePolicy vs the passcode authenticator alone (added time; target <= 1000 us)")
        let directory = try AuthenticatorBenchmarks.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        guard let confdir = try Measure.writeBenchPAM(in: directory) else {
            print("evaluatePolicy (passcode): not measured: pam_matrix missing (apt-get install libpam-wrapper)")
            return
        }
        let pam = PasscodeAuthenticator.Configuration(service: "la-bench", configurationDirectory: confdir)

        let client = try EmbeddedClient(
            configuration: EmbeddedConfiguration(
                dataDirectory: URL(fileURLWithPath: directory + "/store"), accessGroups: ["bench"]),
            authentication: AuthenticationConfiguration(
                stateDirectory: directory + "/la-state", username: "bench", passcode: pam,
                readerDrivers: ["virtual_device"]))
        let context = KeychainClientSelection.$current.withValue(client) { LAContext() }
        context.presenter = BenchPresenter()
        let authenticator = PasscodeAuthenticator(
            configuration: pam, policy: try AttemptPolicy(directory: directory + "/pam-state"))
        let presenter = AuthenticatorBenchmarks.FixedPasscode()

        let evaluate: @Sendable () async throws -> Void = {
            _ = try await context.evaluatePolicy(.deviceOwnerAuthentication, localizedReason: "bench")
        }
        let authenticate: @Sendable () async throws -> Void = {
            try await authenticator.authenticate(user: "bench", presenter: presenter)
        }
        for _ in 0..<50 {
            try await evaluate()
            try await authenticate()
        }
        // Alternating rounds, best of each: both sides see the same machine load.
        var ours = 0.0
        var baseline = 0.0
        for _ in 0..<5 {
            ours = max(ours, try await rate(evaluate))
            baseline = max(baseline, try await rate(authenticate))
        }
        AuthenticatorBenchmarks.report(
            "evaluatePolicy(.deviceOwnerAuthentication) by passcode (pam_matrix)", ours: ours, baseline: baseline,
            baselineName: "PasscodeAuthenticator.authenticate")
        context.invalidate()
    }

    /// Calls per second of `body` over 0.5 s of wall-clock time.
    static func rate(_ body: @Sendable () async throws -> Void) async throws -> Double {
        var iterations = 0
        let start = ContinuousClock.now
        while ContinuousClock.now - start < .milliseconds(500) {
            try await body()
            iterations += 1
        }
        return Double(iterations) / AuthenticatorBenchmarks.seconds(ContinuousClock.now - start)
    }
}
