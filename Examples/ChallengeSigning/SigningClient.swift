import Foundation
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
