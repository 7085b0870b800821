import Authenticators
import EmbeddedEngine
import FIDOAuthenticator
import FIDOProtocol
import Foundation
import KeychainServices
import LocalAuthentication
import SecureCrypto
import SecurityClient
import SecurityProtocol

/// `lactl fido`'s authenticator (in process, embedded, on the virtual reader): GetAssertion with the finger scanned
/// once per assertion, against the finger check alone (`evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics)` on
/// the same reader, scans queued in advance for both); the difference is what the authenticator adds (CBOR, the
/// credential's record, its right, the counter's durable write, the enclave's signature). Target: at most 5 ms. That
/// added time, as assertions per second without the finger, is then set against raw OpenSSL ECDSA P-256 signatures
/// (target: 0.8).
enum FIDOBenchmarks {
    static let printID = "bench-fido"

    static func run() async throws {
        print("== lactl fido: assertions with the finger vs the finger alone (added time; target <= 5000 us)")
        let directory = try AuthenticatorBenchmarks.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        do {
            try await assertions(directory: directory)
        } catch {
            print("fido assertions: not measured: \(error)")
        }
    }

    static func assertions(directory: String, count: Int = 100) async throws {
        let socketPath = directory + "/reader.sock"
        setenv("FP_DRIVERS_WHITELIST", "virtual_device", 1)
        setenv("FP_VIRTUAL_DEVICE", socketPath, 1)
        guard let confdir = try Measure.writeBenchPAM(in: directory) else {
            print("fido assertions: not measured: pam_matrix missing (apt-get install libpam-wrapper)")
            return
        }
        let client = try EmbeddedClient(
            configuration: EmbeddedConfiguration(
                dataDirectory: URL(fileURLWithPath: directory + "/store"), accessGroups: ["bench"]),
            authentication: AuthenticationConfiguration(
                stateDirectory: directory + "/la-state", username: "bench",
                passcode: .init(service: "la-bench", configurationDirectory: confdir),
                readerDrivers: ["virtual_device"]))
        // The finger enrolled as `lactl enroll` does it: the passcode first, then the reader's scans.
        let enrolling = try await client.passcodeContext(
            reason: "enroll", presenter: EnrollmentPresenter())
        async let enrolled = client.send(.enroll(.rightIndex, context: enrolling))
        _ = try await AuthenticatorBenchmarks.feed(socketPath, Array(repeating: "SCAN \(printID)", count: 5))
        guard case .enrolled = try await enrolled else { throw AuthenticatorBenchmarks.BenchFailure("enroll failed") }
        _ = try await client.send(.discard(enrolling))

        // As `lactl fido serve` approves, with a presenter that waits for the finger without a word.
        let authenticator = FIDOAuthenticator(credentials: FIDOCredentials(client: client)) { right, reason in
            right.presenter = SilentPresenter()
            try await right.authorize(localizedReason: reason)
        }
        let clientDataHash = [UInt8](repeating: 0x42, count: 32)
        let rp = "bench.example"

        // One credential, made after a scan.
        async let made = authenticator.respond(
            to: [CTAP2.Command.makeCredential.rawValue]
                + CBOR.map([
                    .int(1): .bytes(clientDataHash), .int(2): .map([.text("id"): .text(rp)]),
                    .int(3): .map([.text("id"): .bytes([1, 2, 3]), .text("name"): .text("bench")]),
                    .int(4): .array([.map([.text("alg"): .int(CTAP2.es256), .text("type"): .text("public-key")])]),
                    .int(7): .map([.text("rk"): .bool(true), .text("uv"): .bool(true)]),
                ]).encoded())
        _ = try await AuthenticatorBenchmarks.feed(socketPath, ["SCAN \(printID)"])
        guard await made.first == CTAP2.Status.ok.rawValue else {
            throw AuthenticatorBenchmarks.BenchFailure("MakeCredential failed: status \(await made.first ?? 0xFF)")
        }
        let request =
            [CTAP2.Command.getAssertion.rawValue]
            + CBOR.map([
                .int(1): .text(rp), .int(2): .bytes(clientDataHash), .int(5): .map([.text("uv"): .bool(true)]),
            ]).encoded()

        // Ours: every assertion finds its scan waiting (queued behind the warm-up's SLEEP).
        async let warmUp = authenticator.respond(to: request)
        let feedOurs = try await AuthenticatorBenchmarks.feed(
            socketPath, ["SLEEP 3000"] + Array(repeating: "SCAN \(printID)", count: count + 1))
        guard await warmUp.first == CTAP2.Status.ok.rawValue else {
            throw AuthenticatorBenchmarks.BenchFailure("GetAssertion failed")
        }
        var start = ContinuousClock.now
        for _ in 0..<count {
            guard await authenticator.respond(to: request).first == CTAP2.Status.ok.rawValue else {
                throw AuthenticatorBenchmarks.BenchFailure("GetAssertion failed")
            }
        }
        let ours = Double(count) / AuthenticatorBenchmarks.seconds(ContinuousClock.now - start)

        // The finger check alone, the same way.
        let evaluate: @Sendable () async throws -> Void = {
            let check = KeychainClientSelection.$current.withValue(client) { LAContext() }
            check.presenter = SilentPresenter()
            _ = try await check.evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, localizedReason: "bench")
        }
        async let warmUpFinger: Void = evaluate()
        let feedFinger = try await AuthenticatorBenchmarks.feed(
            socketPath, ["SLEEP 3000"] + Array(repeating: "SCAN \(printID)", count: count + 1))
        try await warmUpFinger
        start = ContinuousClock.now
        for _ in 0..<count { try await evaluate() }
        let finger = Double(count) / AuthenticatorBenchmarks.seconds(ContinuousClock.now - start)
        if max(feedOurs, feedFinger) > .seconds(3) {
            print("fido assertions: warning: queueing scans took longer than the reader's SLEEP; rates include feeding")
        }
        AuthenticatorBenchmarks.report(
            "fido GetAssertion (uv, finger scanned per assertion)", ours: ours, baseline: finger,
            baselineName: "evaluatePolicy(biometrics) alone", targetMicroseconds: 5000)

        // The added time as a rate, against raw OpenSSL ECDSA on a key in memory.
        let added = 1 / ours - 1 / finger
        let key = try P256.PrivateKey()
        let message = Data(repeating: 0x42, count: 69)
        var signatures = 0
        start = ContinuousClock.now
        while ContinuousClock.now - start < .milliseconds(500) {
            _ = try key.signature(for: message)
            signatures += 1
        }
        let openssl = Double(signatures) / AuthenticatorBenchmarks.seconds(ContinuousClock.now - start)
        let withoutFinger = added > 0 ? 1 / added : .infinity
        print(
            String(
                format:
                    "fido assertion without the finger: %.0f ops/s vs raw OpenSSL ECDSA P-256 %.0f ops/s: ratio %.3f (target >= 0.8)",
                withoutFinger, openssl, withoutFinger / openssl))
    }
}

/// Shows nothing, asks nothing: the finger is the only answer.
struct SilentPresenter: AuthenticationPresenter {
    func fingerprintPromptDidBegin(
        _ prompt: AuthenticationPrompt, respond: @escaping @Sendable (AuthenticationPromptAction) -> Void
    ) {}
    func passcode(for prompt: AuthenticationPrompt, question: PasscodeQuestion) -> AuthenticationSecret? { nil }
}

/// Answers the enrollment's passcode question with the bench user's passcode.
struct EnrollmentPresenter: EvaluationPresenter {
    func fingerprintPromptDidBegin(_ prompt: EvaluationPrompt, respond: @escaping @Sendable (PromptAction) -> Void) {
        respond(.cancel)
    }
    func fingerprintPrompt(_ event: FingerprintPromptEvent) {}
    func fingerprintPromptDidEnd() {}
    func show(_ message: PasscodeMessage) {}
    func confirm(_ prompt: TrustPrompt) -> TrustChoice? { nil }
    func passcode(_ prompt: EvaluationPrompt, question: PasscodePrompt) -> SecureBytes? {
        SecureBytes(Array("secret".utf8))
    }
}
