import ArgumentParser
import Authenticators
import EmbeddedEngine
import Foundation
import KeychainServices
import SecureCrypto
import SecurityClient
import SecurityProtocol
import SwiftKeychain

#if canImport(Glibc)
    import Glibc
#endif

/// `lactl demo`: the main flow end to end on real parts, in a throwaway directory, explained as it goes.
///
/// Needs no reader and no PAM setup: fingerprints go through libfprint's own virtual reader (driven over its
/// socket, as a finger on a real reader would be), passcodes through the real PAM library with pam_matrix and a
/// password file written for the run. Nothing outside the throwaway directory is touched.
struct Demo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the main flow end to end on libfprint's virtual reader and a real PAM stack.")

    @Flag(help: "Keep the throwaway directory and print its path.")
    var keep = false

    func run() async throws {
        let directory = try makeThrowawayDirectory()
        defer { if !keep { try? FileManager.default.removeItem(atPath: directory) } }
        say(
            "swift-local-authentication demo — everything below runs on real parts in \(keep ? directory : "a throwaway directory")."
        )

        try signChallenge()
        try storeSecret(in: directory)
        try await fingerprint(in: directory)
        try await passcode(in: directory)

        say("\nDone. Each step above used OpenSSL 3, SQLite, libfprint-2 or Linux-PAM for real; none was simulated.")
    }

    /// 1. A server's challenge signed with a P-256 key and checked with the public key alone.
    func signChallenge() throws {
        heading("1. Signing a server's challenge with a P-256 key (OpenSSL 3)")
        let key = try P256.PrivateKey()
        let challenge = try SecureRandom.bytes(32)
        say("The server sends a random 32-byte challenge: \(challenge.prefix(8).hexString)…")
        let signature = try key.signature(for: challenge)
        say("The client signs it with its private key: a \(signature.derRepresentation.count)-byte ECDSA signature.")
        let verifies = key.publicKey.isValidSignature(signature, for: challenge)
        say(
            "The server checks it with the 65-byte public key it registered earlier: \(verifies ? "valid" : "INVALID")."
        )
        var forged = challenge
        forged[0] ^= 1
        let forgedVerifies = key.publicKey.isValidSignature(signature, for: forged)
        say(
            "The same signature on a different challenge: \(forgedVerifies ? "ACCEPTED (bug)" : "rejected, as it must be")."
        )
        guard verifies, !forgedVerifies else { throw ValidationError("signature check did not behave") }
    }

    /// 2. A secret kept with Apple's SecItem calls, encrypted at rest, refused while the keychain is locked.
    func storeSecret(in directory: String) throws {
        heading("2. Keeping a secret in the encrypted keychain (SQLite, two AES-256-GCM layers)")
        let storeDirectory = directory + "/keychain"
        // Unlocking needs the passcode: this store's engine checks it through pam_matrix (see step 4).
        let pam = try writePAMService(in: directory)
        let client = try EmbeddedClient(
            configuration: EmbeddedConfiguration(
                dataDirectory: URL(fileURLWithPath: storeDirectory), accessGroups: ["demo.app"]),
            authentication: AuthenticationConfiguration(
                stateDirectory: storeDirectory, username: "demo",
                passcode: .init(service: "local-authentication", configurationDirectory: pam),
                readerDrivers: ["no_such_driver"]),
            defaultPresenter: ScriptedPasscode(answer: "correct horse"))
        let keychain = Keychain(client: client)
        let token = Data("demo-api-token-\(UUID().uuidString)".utf8)
        try keychain.add(GenericPassword(service: "api.example.com", account: "demo", password: token))
        say("Added a generic password for service \"api.example.com\", account \"demo\".")
        let found = try keychain.genericPassword(service: "api.example.com", account: "demo")
        say("Read it back by service and account: \(found?.password == token ? "same bytes" : "MISMATCH").")
        let onDisk = try FileManager.default.contentsOfDirectory(atPath: storeDirectory)
            .compactMap { FileManager.default.contents(atPath: storeDirectory + "/" + $0) }
        let leaked = onDisk.contains { $0.range(of: token) != nil || $0.range(of: Data("api.example.com".utf8)) != nil }
        say(
            "Searched every file of the store for the token and the service name: \(leaked ? "FOUND (bug)" : "neither is there in clear")."
        )
        try keychain.lock()
        let whileLocked: String
        do {
            _ = try keychain.genericPassword(service: "api.example.com", account: "demo")
            whileLocked = "returned data (bug)"
        } catch let error as KeychainError {
            whileLocked = "refused with OSStatus \(error.status)"
        }
        say("Locked the keychain and asked again: \(whileLocked).")
        try keychain.unlock()
        say(
            "Unlocked it with the passcode (checked by PAM): \(try keychain.genericPassword(service: "api.example.com", account: "demo") != nil ? "readable again" : "MISSING")."
        )
        guard found?.password == token, !leaked else { throw ValidationError("keychain did not behave") }
    }

    /// The engine for steps 3 and 4: a store of its own, the virtual reader and PAM through pam_matrix. The demo
    /// asks it through client requests, as `lactl biometry` and every program do.
    func authenticationClient(in directory: String, pam: String) throws -> EmbeddedClient {
        try EmbeddedClient(
            configuration: EmbeddedConfiguration(
                dataDirectory: URL(fileURLWithPath: directory + "/authenticators"), accessGroups: ["demo.app"]),
            authentication: AuthenticationConfiguration(
                stateDirectory: directory + "/authenticators", username: "demo",
                passcode: .init(service: "local-authentication", configurationDirectory: pam),
                readerDrivers: ["virtual_device"], attemptTimeout: .seconds(20)))
    }

    /// A new context of `client` after the passcode `answer`; throws what the evaluation throws.
    func passcodeContext(_ client: EmbeddedClient, answer: String) async throws -> AuthenticationContextID {
        try await client.passcodeContext(reason: "demo", presenter: ScriptedPasscode(answer: answer))
    }

    /// The enrolled-set state hash, or nil when nothing is enrolled.
    func stateHash(_ client: EmbeddedClient) async throws -> Data? {
        guard case .prints(_, let hash) = try await client.send(.enrolledPrints) else { return nil }
        return hash
    }

    /// 3. Enrolling (after the passcode) and verifying a finger on libfprint's virtual reader, and the enrolled-set
    /// state hash.
    func fingerprint(in directory: String) async throws {
        heading("3. Fingerprints through libfprint-2 (its virtual reader stands in for the hardware)")
        let socket = VirtualReaderSocket(path: directory + "/virtual-reader.sock")
        setenv("FP_DRIVERS_WHITELIST", "virtual_device", 1)
        setenv("FP_VIRTUAL_DEVICE", socket.path, 1)
        let client = try authenticationClient(in: directory, pam: try writePAMService(in: directory))
        guard case .reader(let reader) = try await client.send(.reader) else { return }
        say("Opened reader \"\(reader.name)\" (driver \(reader.driver)).")
        say(
            "Before enrolling, the enrolled-set state hash is \(try await stateHash(client)?.prefix(8).hexString ?? "nil (nothing enrolled)")."
        )

        let context = try await passcodeContext(client, answer: "correct horse")
        say("Enrolling needs the passcode first, as on Apple's devices: PAM accepted it.")
        async let enrolled = client.send(.enroll(.rightIndex, context: context)) { event in
            if case .enrollment(.stageCompleted(let completed, let total)) = event {
                say("  enrolling: stage \(completed)/\(total)")
            }
        }
        try await socket.send(Array(repeating: "SCAN demo-finger", count: 5))
        guard case .enrolled(let print) = try await enrolled else { return }
        let firstHash = try await stateHash(client)
        say("Enrolled the right index finger; state hash now \(firstHash?.prefix(8).hexString ?? "nil").")

        async let matched = client.send(.verifyFinger)
        try await socket.send("SCAN demo-finger")
        if case .matched(let match) = try await matched {
            say(
                "The same finger on the reader: matched \(match.identifier == print.identifier ? "the enrolled print" : "ANOTHER print")."
            )
        }

        async let mismatched = client.send(.verifyFinger)
        try await socket.send("SCAN someone-else")
        do {
            _ = try await mismatched
            say("Another finger: ACCEPTED (bug)")
        } catch let error as AuthenticationError {
            say("Another finger: refused (LAError code \(error.code.rawValue), authenticationFailed).")
        }

        async let second = client.send(.enroll(.leftIndex, context: context))
        try await socket.send(Array(repeating: "SCAN second-finger", count: 5))
        _ = try await second
        let secondHash = try await stateHash(client)
        say(
            "Enrolled a second finger: the state hash changed (\(secondHash?.prefix(8).hexString ?? "nil")). Keys bound to"
        )
        say("the first enrolled set (.biometryCurrentSet) stop working for good at this point.")
        _ = try await client.send(.closeReader)
        guard firstHash != nil, firstHash != secondHash else { throw ValidationError("state hash did not change") }
    }

    /// 4. A passcode checked by the real PAM library, and the escalating wait after repeated failures.
    func passcode(in directory: String) async throws {
        heading("4. Passcodes through Linux-PAM (pam_matrix with a password file written for this run)")
        let module = "/usr/lib/x86_64-linux-gnu/pam_wrapper/pam_matrix.so"
        guard FileManager.default.fileExists(atPath: module) else {
            say(
                "pam_matrix is not installed (package libpam-wrapper); `make demo` installs it through scripts/bootstrap."
            )
            return
        }
        let client = try authenticationClient(in: directory, pam: try writePAMService(in: directory))
        _ = try await passcodeContext(client, answer: "correct horse")
        say("The right passcode: accepted by PAM (pam_authenticate, then pam_acct_mgmt).")
        for attempt in 1...5 {
            do {
                _ = try await passcodeContext(client, answer: "wrong \(attempt)")
            } catch let error as AuthenticationError {
                if attempt == 5 {
                    say("Five wrong passcodes in a row: the fifth is refused too (code \(error.code.rawValue)).")
                }
            }
        }
        do {
            _ = try await passcodeContext(client, answer: "correct horse")
            say("Even the right passcode right away: ACCEPTED (bug: no escalation)")
        } catch let error as AuthenticationError {
            say("Even the right passcode right away is refused before PAM is asked: \(error.message)")
        }
    }

    /// Writes the service `local-authentication` for pam_matrix, with user `demo` and passcode `correct horse`,
    /// under `directory`; returns its configuration directory.
    func writePAMService(in directory: String) throws -> String {
        let module = "/usr/lib/x86_64-linux-gnu/pam_wrapper/pam_matrix.so"
        let pamDirectory = directory + "/pam.d"
        try FileManager.default.createDirectory(atPath: pamDirectory, withIntermediateDirectories: true)
        let passdb = directory + "/passdb"
        try "demo:correct horse:local-authentication\n".write(toFile: passdb, atomically: true, encoding: .utf8)
        try "auth required \(module) passdb=\(passdb)\naccount required \(module) passdb=\(passdb)\n"
            .write(toFile: pamDirectory + "/local-authentication", atomically: true, encoding: .utf8)
        return pamDirectory
    }

    /// A new 0700 directory under the system's temporary directory, with a random name.
    func makeThrowawayDirectory() throws -> String {
        let path = NSTemporaryDirectory() + "/lactl-demo-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(
            atPath: path, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        return path
    }

    func heading(_ text: String) {
        say("\n" + text)
    }
}

/// Answers passcode questions with a fixed passcode, as a program that already holds it would.
private struct ScriptedPasscode: EvaluationPresenter {
    let answer: String

    func show(_ message: PasscodeMessage) {}
    func fingerprintPromptDidBegin(_ prompt: EvaluationPrompt, respond: @escaping @Sendable (PromptAction) -> Void) {
        respond(.fallback)
    }
    func fingerprintPrompt(_ event: FingerprintPromptEvent) {}
    func fingerprintPromptDidEnd() {}
    func passcode(_ prompt: EvaluationPrompt, question: PasscodePrompt) -> SecureBytes? {
        SecureBytes(Data(answer.utf8))
    }
}

private func say(_ text: String) {
    FileHandle.standardOutput.write(Data((text + "\n").utf8))
}
