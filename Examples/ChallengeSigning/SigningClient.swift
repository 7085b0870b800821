import Foundation
import KeyAttestation
import KeychainServices
import LocalAuthentication

/// The client side: a persisted right whose key signs the server's challenges, one fingerprint per signature.
struct SigningClient {
    /// The identifier the right is saved under in `LARightStore.shared`.
    static let rightIdentifier = "challenge-signing"

    /// The server this client talks to.
    let server: HTTPClient
    /// Who draws the prompts (nil: the right's default, the terminal).
    let presenter: (any AuthenticationPresenter)?
    /// Prints one line of the story.
    let say: @Sendable (String) -> Void

    /// The saved right, or a new `.biometryCurrentSet` right saved now: its key stops working for good once the
    /// enrolled fingerprints change.
    func loadOrSaveRight() async throws -> LAPersistedRight {
        let right: LAPersistedRight
        do {
            right = try await LARightStore.shared.right(forIdentifier: Self.rightIdentifier)
            say("client: found the right \"\(Self.rightIdentifier)\" saved by an earlier run.")
        } catch {
            right = try await LARightStore.shared.saveRight(
                LARight(requirement: .biometryCurrentSet), identifier: Self.rightIdentifier)
            say("client: saved a new right \"\(Self.rightIdentifier)\" (requirement: the fingerprints enrolled now);")
            say("        it comes with its own P-256 private key, kept by the enclave.")
        }
        if let presenter { right.presenter = presenter }
        return right
    }

    /// Sends the right's public key to the server. Reading the public key needs no authorization.
    func register(_ right: LAPersistedRight) async throws {
        let publicKey = try await right.key.publicKey.bytes
        let (status, body) = try await server.send(.POST, "/register", body: publicKey.hexString)
        say("client: registered its \(publicKey.count)-byte public key with the server: \(status.code) \(body).")
    }

    /// Registers the right's key with a server that accepts TPM-attested keys only: sends the TPM's identity,
    /// has the TPM answer the server's challenge for the key, sends the answer. Neither step needs the right
    /// authorized. Returns the answer sent (for the demo's replay).
    func registerAttested(_ right: LAPersistedRight) async throws -> TPMKeyAttestation {
        let identity = try await right.key.tpmIdentity()
        say(
            "client: the key is held by the TPM; sent the TPM's identity (endorsement certificate: "
                + "\(identity.endorsementCertificate?.count ?? 0) bytes).")
        let challenge = try await requestAttestationChallenge(for: identity)
        say("server: the endorsement certificate chains to the TPM maker's CA; sent a credential only that TPM opens.")
        let attestation = try await right.key.tpmAttestation(answering: challenge)
        say("client: the TPM opened the credential and certified the key with it.")
        let (status, body) = try await sendAttestation(attestation)
        say("server: checked the certification: \(status) \(body).")
        guard status == 201 else { throw ExampleError("the server did not accept the attestation") }
        return attestation
    }

    /// Shows the server a TPM's identity; returns its challenge.
    func requestAttestationChallenge(for identity: TPMIdentity) async throws -> TPMAttestationChallenge {
        let (status, body) = try await server.send(
            .POST, "/attestation/challenge", body: String(decoding: try JSONEncoder().encode(identity), as: UTF8.self))
        guard status == .ok,
            let challenge = try? JSONDecoder().decode(TPMAttestationChallenge.self, from: Data(body.utf8))
        else { throw ExampleError("the server refused the TPM's identity: \(status.code) \(body)") }
        return challenge
    }

    /// Sends a TPM's answer as it is. Returns the server's status code and verdict.
    func sendAttestation(_ attestation: TPMKeyAttestation) async throws -> (UInt, String) {
        let (status, body) = try await server.send(
            .POST, "/register/attested", body: String(decoding: try JSONEncoder().encode(attestation), as: UTF8.self))
        return (status.code, body)
    }

    /// Sends a bare public key for registration, as a client without attestation would. Returns the server's
    /// status code and verdict.
    func registerUnattested(_ publicKey: Data) async throws -> (UInt, String) {
        let (status, body) = try await server.send(.POST, "/register", body: publicKey.hexString)
        return (status.code, body)
    }

    /// Fetches a challenge, authorizes the right (the fingerprint prompt; `touchReader` puts the finger on the
    /// reader), signs the challenge, and sends the signature. Returns what was sent and the server's verdict.
    func signChallenge(
        with right: LAPersistedRight, touchReader: @Sendable () async throws -> Void
    ) async throws -> SignedChallenge {
        let challenge = try await fetchChallenge()
        let challengeHex = challenge.hexString
        say("server: issued challenge \(challengeHex.prefix(16))…")

        // The prompt waits for a finger; meanwhile the finger goes on the reader.
        async let touched: Void = touchReader()
        try await right.authorize(localizedReason: "Sign in to the example server")
        try await touched
        say("client: the fingerprint matched; the right is authorized.")

        let signature = try await right.key.sign(challenge, algorithm: .ecdsaSignatureMessageX962SHA256)
        say("client: signed the challenge with the right's private key (\(signature.count)-byte ECDSA signature).")
        await right.deauthorize()

        let (status, verdict) = try await server.send(.POST, "/verify", body: "\(challengeHex) \(signature.hexString)")
        say("server: checked the signature with the registered public key (swift-crypto): \(status.code) \(verdict).")
        return SignedChallenge(challenge: challenge, signature: signature, verdict: verdict)
    }

    /// Sends `challenge` and `signature` as they are, without authorizing or signing anything. Returns the
    /// server's status code and verdict.
    func resend(challenge: Data, signature: Data) async throws -> (UInt, String) {
        let (status, verdict) = try await server.send(
            .POST, "/verify", body: "\(challenge.hexString) \(signature.hexString)")
        return (status.code, verdict)
    }

    /// A fresh challenge from the server.
    func fetchChallenge() async throws -> Data {
        let (_, challengeHex) = try await server.send(.GET, "/challenge")
        guard let challenge = Data(hex: challengeHex) else { throw ExampleError("the server sent no challenge") }
        return challenge
    }
}

/// One round: the challenge, its signature and what the server said.
struct SignedChallenge {
    /// The server's challenge.
    var challenge: Data
    /// The DER-encoded ECDSA signature over it.
    var signature: Data
    /// The server's verdict: `verified` or why it rejected.
    var verdict: String
}

/// A failure of the example itself, with a message for the reader.
struct ExampleError: Error, CustomStringConvertible {
    /// What went wrong.
    var description: String

    /// An error saying `description`.
    init(_ description: String) { self.description = description }
}
