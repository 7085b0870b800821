import FIDOAuthenticator
import FIDOProtocol
import Testing

/// What the authenticator answers requests whose CBOR is well formed but not what CTAP 2.1 asks (§8.1, §6): a field
/// of the wrong type is `CTAP2_ERR_CBOR_UNEXPECTED_TYPE`, a field left out `CTAP2_ERR_MISSING_PARAMETER`, CBOR that
/// does not decode `CTAP2_ERR_INVALID_CBOR`. Each is answered before any keychain is read.
@Suite("FIDO: malformed requests")
struct CTAP2RequestTests {
    func status(_ command: CTAP2.Command, _ parameters: CBOR) async -> UInt8? {
        await FIDOAuthenticator().respond(to: [command.rawValue] + parameters.encoded()).first
    }

    let hash = CBOR.bytes([UInt8](repeating: 7, count: 32))

    @Test func aFieldOfTheWrongTypeIsAnUnexpectedType() async {
        let unexpected = CTAP2.Status.cborUnexpectedType.rawValue
        // The RP ID as bytes, the client data hash as text.
        #expect(await status(.getAssertion, .map([.int(1): .bytes([1]), .int(2): hash])) == unexpected)
        #expect(await status(.getAssertion, .map([.int(1): .text("a.test"), .int(2): .text("x")])) == unexpected)
        // Options as an array; an option that is not a boolean.
        let credential: KeyValuePairs<CBOR, CBOR> = [
            .int(1): hash, .int(2): .map([.text("id"): .text("a.test")]), .int(3): .map([.text("id"): .bytes([1])]),
            .int(4): .array([.map([.text("alg"): .int(-7), .text("type"): .text("public-key")])]),
            .int(7): .array([.text("rk")]),
        ]
        #expect(await status(.makeCredential, .map(credential)) == unexpected)
        #expect(
            await status(
                .getAssertion, .map([.int(1): .text("a.test"), .int(2): hash, .int(5): .map([.text("up"): .int(0)])]))
                == unexpected)
        // An allow list entry whose ID is text; the user as text.
        #expect(
            await status(
                .getAssertion,
                .map([
                    .int(1): .text("a.test"), .int(2): hash,
                    .int(3): .array([.map([.text("id"): .text("x"), .text("type"): .text("public-key")])]),
                ])) == unexpected)
        #expect(
            await status(
                .makeCredential,
                .map([
                    .int(1): hash, .int(2): .map([.text("id"): .text("a.test")]), .int(3): .text("alice"),
                    .int(4): .array([]),
                ])) == unexpected)
        // ClientPIN's and credential management's subcommand as text; parameters that are not a map.
        #expect(await status(.clientPIN, .map([.int(2): .text("getPINRetries")])) == unexpected)
        #expect(await status(.credentialManagement, .map([.int(1): .text("metadata")])) == unexpected)
        #expect(await status(.getAssertion, .array([.text("a.test")])) == unexpected)
    }

    @Test func aMissingFieldIsAMissingParameter() async {
        let missing = CTAP2.Status.missingParameter.rawValue
        #expect(await status(.getAssertion, .map([.int(1): .text("a.test")])) == missing)
        #expect(await status(.makeCredential, .map([.int(1): hash])) == missing)
        #expect(await status(.clientPIN, .map([.int(1): .int(2)])) == missing)
        // Credential management without a token: the token is required (§6.8 step 2).
        #expect(
            await status(.credentialManagementPreview, .map([.int(1): .int(1)]))
                == CTAP2.Status.pinUvAuthTokenRequired.rawValue)
    }

    @Test func cborThatDoesNotDecodeIsInvalid() async {
        let truncated = Array(CBOR.map([.int(1): .text("a.test"), .int(2): hash]).encoded().dropLast())
        let answer = await FIDOAuthenticator().respond(to: [CTAP2.Command.getAssertion.rawValue] + truncated)
        #expect(answer == [CTAP2.Status.invalidCBOR.rawValue])
    }
}
