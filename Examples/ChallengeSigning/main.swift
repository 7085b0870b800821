// ChallengeSigning: a server issues random challenges; a client signs each one with the key of a persisted right,
// after a fingerprint authorizes it; the server verifies the signature with the public key registered earlier.
// Both talk real HTTP over loopback (127.0.0.1, a port the system picks).
//
//     ChallengeSigning demo   the whole story on libfprint's virtual reader in a throwaway store (`make demo`)
//     ChallengeSigning        the same client and server on your reader, your store and your PAM stack
//
// The server stops by itself after a fixed number of requests.
//
// With CHALLENGE_SIGNING_TPM_CA (comma-separated PEM files: a TPM maker's root and intermediate CA certificates),
// the server registers only keys a TPM attests were made inside it (key attestation, our addition), and the client
// goes through that exchange first; it needs the TPM enclave backend.

import Foundation
import KeyAttestation
import LocalAuthentication

/// Prints one line at once (the demo's output is read as it happens).
@Sendable func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

/// `ChallengeSigning demo`: enroll, save the right, sign twice, then change the fingerprints and watch the right
/// refuse. Returns normally only when every step behaved as it should.
func runDemo() async throws {
    say("ChallengeSigning demo: a server, a client and a fingerprint, all on this machine.")
    say("Nothing outside a throwaway directory is touched; the fingerprint reader is libfprint's virtual one.\n")
    let environment = try DemoEnvironment()
    let server = try await ChallengeServer(requestLimit: 24, attestation: try attestationVerifier())
    do {
        try await demoStory(environment: environment, server: server)
    } catch {
        try? await server.shutdown()
        await environment.remove()
        throw error
    }
    try await server.shutdown()
    await environment.remove()
}

private func demoStory(environment: DemoEnvironment, server: ChallengeServer) async throws {
    say("1. Enrolling a fingerprint")
    let firstHash = try await environment.enroll("alice-right-index", finger: .rightIndex)
    say("   Alice scanned her right index finger 5 times; the reader now knows it.\n")

    say("2. The server starts on \(server.baseURL)")
    guard let http = HTTPClient(url: server.baseURL) else { throw ExampleError("bad server address") }
    // The demo's presenter: leave every fingerprint prompt to the reader (no terminal, nobody to click).
    let client = SigningClient(
        server: http, presenter: ScriptedAuthenticationPresenter(fingerprintSteps: [.waitForReader, .waitForReader]),
        say: { say("   " + $0) })

    say("\n3. The client saves a right and registers its public key")
    let right = try await client.loadOrSaveRight()
    if server.attests {
        let attestation = try await client.registerAttested(right)
        _ = try await client.requestAttestationChallenge(for: try await right.key.tpmIdentity())
        let (replayStatus, replayVerdict) = try await client.sendAttestation(attestation)
        say("   Someone replays that attestation for a new challenge: \(replayStatus) \(replayVerdict).")
        let someKey = try await right.key.publicKey.bytes
        let (bareStatus, bareVerdict) = try await client.registerUnattested(someKey)
        say("   Someone registers a key without attestation: \(bareStatus) \(bareVerdict).")
        guard replayStatus == 401, bareStatus == 403 else {
            throw ExampleError("the server accepted an unattested key")
        }
    } else {
        try await client.register(right)
    }

    say("\n4. Without a fingerprint the key does not sign")
    do {
        _ = try await right.key.sign(Data("anything".utf8), algorithm: .ecdsaSignatureMessageX962SHA256)
        throw ExampleError("the key signed without authorization")
    } catch let error as LAError {
        say("   client: signing before authorizing is refused: \(error.localizedDescription)")
    }

    var last: SignedChallenge?
    for round in 1...2 {
        say("\n\(round + 4). Signing challenge \(round): Alice puts her right index finger on the reader")
        let signed = try await client.signChallenge(with: right) {
            try await environment.touch("alice-right-index")
        }
        guard signed.verdict == "verified" else { throw ExampleError("the server did not verify: \(signed.verdict)") }
        last = signed
    }

    say("\n7. The server accepts each signature once, and only for its own challenge")
    guard let last else { throw ExampleError("no round was signed") }
    let (replayStatus, replayVerdict) = try await client.resend(challenge: last.challenge, signature: last.signature)
    say("   Someone replays challenge 2 with its signature: \(replayStatus) \(replayVerdict).")
    let fresh = try await client.fetchChallenge()
    let (forgedStatus, forgedVerdict) = try await client.resend(challenge: fresh, signature: last.signature)
    say("   Someone sends challenge 2's signature for a new challenge: \(forgedStatus) \(forgedVerdict).")
    guard replayStatus == 401, forgedStatus == 401 else { throw ExampleError("the server accepted a replay") }

    say("\n8. The fingerprints change: someone enrolls another finger")
    let secondHash = try await environment.enroll("mallory-left-index", finger: .leftIndex)
    guard firstHash != secondHash else { throw ExampleError("the enrolled set did not change") }
    say("   A second finger is enrolled. The right was saved for the fingerprints enrolled at that time,")
    say("   so from now on it must refuse, even for Alice's own finger.")
    do {
        let reloaded = try await LARightStore.shared.right(forIdentifier: SigningClient.rightIdentifier)
        try await reloaded.authorize(localizedReason: "Sign in to the example server")
        throw ExampleError("the right authorized after the enrollment changed")
    } catch let error as LAError {
        say("   client: authorizing the right again is refused: \(error.localizedDescription)")
    }
    try await LARightStore.shared.removeRight(forIdentifier: SigningClient.rightIdentifier)
    say("   client: removed the right (and its key) from the store.")

    say("\nDone: the server accepted 2 signatures from the registered key, each after a fingerprint, and the right")
    say("refused once the enrolled fingerprints changed.")
}

/// `ChallengeSigning`: the same client and server on the real reader, store and PAM stack, prompting on the
/// terminal. The right is kept between runs; enroll another finger and run again to see it refuse.
func runReal() async throws {
    let server = try await ChallengeServer(requestLimit: 8, attestation: try attestationVerifier())
    say("server: listening on \(server.baseURL)")
    guard let http = HTTPClient(url: server.baseURL) else { throw ExampleError("bad server address") }
    let client = SigningClient(server: http, presenter: nil, say: say)
    do {
        let right = try await client.loadOrSaveRight()
        if server.attests { _ = try await client.registerAttested(right) } else { try await client.register(right) }
        let signed = try await client.signChallenge(with: right) {
            say("client: place an enrolled finger on the reader.")
        }
        try await server.shutdown()
        if signed.verdict != "verified" { exit(1) }
    } catch {
        try? await server.shutdown()
        throw error
    }
}

/// The verifier for `CHALLENGE_SIGNING_TPM_CA`'s certificates (every one trusted), or nil when it is not set.
func attestationVerifier() throws -> TPMAttestationVerifier? {
    guard let list = ProcessInfo.processInfo.environment["CHALLENGE_SIGNING_TPM_CA"], !list.isEmpty else { return nil }
    let certificates = try list.split(separator: ",").map { try Data(contentsOf: URL(fileURLWithPath: String($0))) }
    return try TPMAttestationVerifier(trustedRoots: certificates)
}

do {
    switch CommandLine.arguments.dropFirst().first {
    case "demo": try await runDemo()
    case nil: try await runReal()
    case let other?:
        say("unknown mode '\(other)'; usage: ChallengeSigning [demo]")
        exit(2)
    }
} catch {
    say("ChallengeSigning failed: \(error)")
    exit(1)
}
