import ArgumentParser
import Foundation
import KeyAttestation
import KeychainServices
import LocalAuthentication
import SecurityClient
import SecurityProtocol

/// `lactl keys …`: key attestation for enclave keys held by a TPM (our addition). The two steps of the exchange
/// described in the `KeyAttestation` module, as JSON on standard output for a verifier to take.
struct Keys: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Prove to a server that a right's or SSH key's private key is held by this machine's TPM.",
        discussion: """
            1. `lactl keys identity > identity.json`: the TPM's endorsement certificate and keys; send it to the \
            verifier. 2. The verifier answers with a challenge (JSON: credentialBlob, encryptedSecret). \
            3. `lactl keys attest --right ID --challenge challenge.json > attestation.json`: the TPM certifies the \
            key with the credential only it can open; send that back. Needs the TPM enclave backend.
            """,
        subcommands: [KeysIdentity.self, KeysAttest.self])
}

/// `lactl keys identity`: the TPM's identity (`TPMIdentity`) as JSON.
struct KeysIdentity: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "identity", abstract: "Print the TPM's identity (endorsement certificate and keys) as JSON.")

    @OptionGroup var options: KeychainOptions

    func run() async throws {
        let client = try options.client()
        let response: KeyResponse
        do {
            response = try await client.send(.attestationIdentity)
        } catch let status as KeychainStatus {
            throw KeysFailure(status: status, operation: "read the TPM's identity")
        }
        guard case .attestationIdentity(let certificate, let endorsementKey, let attestationKey) = response else {
            throw KeysFailure(
                status: KeychainStatus(.internalComponent, "the engine answered another request"),
                operation: "read the TPM's identity")
        }
        printJSON(
            TPMIdentity(
                endorsementCertificate: certificate.isEmpty ? nil : certificate, endorsementKey: endorsementKey,
                attestationKey: attestationKey))
    }
}

/// `lactl keys attest`: the TPM's answer (`TPMKeyAttestation`) to a verifier's challenge for one key, as JSON.
struct KeysAttest: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "attest", abstract: "Answer a verifier's challenge for a right's (or SSH key's) key, as JSON.")

    @OptionGroup var options: KeychainOptions

    @Option(help: "The identifier of the right whose key to attest.") var right: String?

    @Option(name: .customLong("ssh-key"), help: "The name of the SSH key to attest (`lactl ssh-key list`).")
    var sshKey: String?

    @Option(
        help: "The verifier's challenge: a JSON file with credentialBlob and encryptedSecret (base64), - for stdin.")
    var challenge: String

    func validate() throws {
        guard (right == nil) != (sshKey == nil) else { throw ValidationError("name one key: --right or --ssh-key") }
    }

    func run() async throws {
        let identifier = right ?? "ssh-key." + (sshKey ?? "")
        guard
            let input = challenge == "-"
                ? FileHandle.standardInput.readDataToEndOfFile() : FileManager.default.contents(atPath: challenge),
            let parsed = try? JSONDecoder().decode(TPMAttestationChallenge.self, from: input)
        else {
            FileHandle.standardError.write(
                Data(
                    "lactl keys attest: \(challenge) is not a challenge (JSON with credentialBlob and encryptedSecret)\n"
                        .utf8))
            throw ExitCode(65)
        }
        // A right is an application's item (through localauthd the user is asked first); an SSH key is lactl's own.
        let client = try options.client(reaching: right == nil ? .claimed : .everyGroup)
        do {
            let attestation = try await KeychainClientSelection.$current.withValue(client) {
                let right = try await LARightStore.shared.right(forIdentifier: identifier)
                return try await right.key.tpmAttestation(answering: parsed)
            }
            printJSON(attestation)
        } catch {
            let nsError = error as NSError
            FileHandle.standardError.write(Data("lactl keys attest: \(error.localizedDescription)\n".utf8))
            throw ExitCode(nsError.domain == NSOSStatusErrorDomain && nsError.code == Int(errSecItemNotFound) ? 44 : 1)
        }
    }
}

/// A failed `lactl keys` step: the message on standard error, exit 1.
struct KeysFailure: Error, CustomStringConvertible {
    let status: KeychainStatus
    let operation: String

    var description: String { "cannot \(operation): \(status.message) (OSStatus \(status.code.rawValue))" }
}

private func printJSON(_ value: some Encodable) {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
    // Encoding these plain structures of Data and optionals cannot fail.
    let data = (try? encoder.encode(value)) ?? Data()
    FileHandle.standardOutput.write(data + Data("\n".utf8))
}
