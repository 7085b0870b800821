import Foundation
import KeyAttestation
import SecureCrypto
import TestSupport
import Testing
import TrustedPlatform

/// Key attestation end to end on swtpm manufactured with an endorsement certificate from a throwaway CA: the TPM's
/// identity, the verifier's credential challenge (made in Swift, opened by the TPM), the certification, and what a
/// replay, a changed byte, another CA, another TPM's certificate or a software "attestation key" get.
@Suite(.enabled(if: SoftwareTPM.isInstalled, "swtpm is not installed (scripts/bootstrap installs it)"))
struct KeyAttestationTests {
    let machine: SoftwareTPM
    var tpm: TPM { TPM(tcti: machine.tcti) }
    let verifier: TPMAttestationVerifier

    init() throws {
        machine = try SoftwareTPM(certified: true)
        verifier = try Self.verifier(trusting: machine)
    }

    static func verifier(trusting machine: SoftwareTPM) throws -> TPMAttestationVerifier {
        let ca = try #require(machine.certificateAuthority)
        return try TPMAttestationVerifier(
            trustedRoots: [try Data(contentsOf: ca.root)], intermediates: [try Data(contentsOf: ca.intermediate)])
    }

    func identity(of tpm: TPM) throws -> TPMIdentity {
        let endorsement = try tpm.withConnection { try $0.endorsement() }
        return TPMIdentity(
            endorsementCertificate: endorsement.certificate.isEmpty ? nil : endorsement.certificate,
            endorsementKey: endorsement.endorsementKey, attestationKey: endorsement.attestationKey)
    }

    func makeKey(_ authorization: SecureBytes) throws -> (TPMObject, Data) {
        try tpm.withConnection { try $0.createP256Key(authorization: authorization) }
    }

    func answer(
        _ challenge: TPMAttestationChallenge, for object: TPMObject, authorization: SecureBytes, on tpm: TPM? = nil
    ) throws -> TPMKeyAttestation {
        let certification = try (tpm ?? self.tpm).withConnection {
            try $0.attest(
                object, authorization: authorization, credentialBlob: challenge.credentialBlob,
                encryptedSecret: challenge.encryptedSecret)
        }
        return TPMKeyAttestation(
            keyPublicArea: object.publicArea.dropFirst(2), statement: certification.attestation,
            signature: certification.signatureR + certification.signatureS)
    }

    @Test func aTPMHeldKeyIsAttested() throws {
        let authorization = try SecureBytes(randomCount: 32)
        let (object, publicKey) = try makeKey(authorization)
        let identity = try identity(of: tpm)
        #expect(identity.endorsementCertificate != nil)
        // The same TPM gives the same identity every time (both keys are primaries from its endorsement seed).
        #expect(try self.identity(of: tpm) == identity)

        let (challenge, expectation) = try verifier.challenge(for: identity)
        let attestation = try answer(challenge, for: object, authorization: authorization)
        let attested = try verifier.verify(attestation, expecting: expectation)
        #expect(attested.publicKey == publicKey)
        #expect(attested.endorsementCertificate == identity.endorsementCertificate)

        // Through JSON, as lactl and the example carry it.
        let carried = try JSONDecoder().decode(
            TPMKeyAttestation.self, from: try JSONEncoder().encode(attestation))
        #expect(try verifier.verify(carried, expecting: expectation).publicKey == publicKey)
    }

    @Test func aRecordedAnswerDoesNotAnswerANewChallenge() throws {
        let authorization = try SecureBytes(randomCount: 32)
        let (object, _) = try makeKey(authorization)
        let identity = try identity(of: tpm)
        let (first, _) = try verifier.challenge(for: identity)
        let recorded = try answer(first, for: object, authorization: authorization)
        let (_, second) = try verifier.challenge(for: identity)
        let error = #expect(throws: TPMAttestationError.self) { try verifier.verify(recorded, expecting: second) }
        #expect(error?.description == "the statement answers another challenge")
    }

    @Test func changedBytesAreRefused() throws {
        let authorization = try SecureBytes(randomCount: 32)
        let (object, _) = try makeKey(authorization)
        let (other, _) = try makeKey(authorization)
        let (challenge, expectation) = try verifier.challenge(for: try identity(of: tpm))
        let attestation = try answer(challenge, for: object, authorization: authorization)
        for index in [0, 10, attestation.statement.count - 1] {
            var changed = attestation
            changed.statement[changed.statement.startIndex + index] ^= 1
            #expect(throws: TPMAttestationError.self) { try verifier.verify(changed, expecting: expectation) }
        }
        var changedSignature = attestation
        changedSignature.signature[changedSignature.signature.startIndex + 40] ^= 1
        #expect(throws: TPMAttestationError.self) { try verifier.verify(changedSignature, expecting: expectation) }
        // Another key's public area with this key's certification: the names differ.
        var swapped = attestation
        swapped.keyPublicArea = other.publicArea.dropFirst(2)
        let error = #expect(throws: TPMAttestationError.self) { try verifier.verify(swapped, expecting: expectation) }
        #expect(error?.description == "the statement certifies another key")
        // A changed challenge does not open in the TPM.
        var garbled = challenge
        garbled.credentialBlob[garbled.credentialBlob.startIndex + 5] ^= 1
        #expect(throws: TPMError.self) { try answer(garbled, for: object, authorization: authorization) }
    }

    @Test func certifyingNeedsTheKeysAuthorization() throws {
        let (object, _) = try makeKey(try SecureBytes(randomCount: 32))
        let (challenge, _) = try verifier.challenge(for: try identity(of: tpm))
        let error = #expect(throws: TPMError.self) {
            try answer(challenge, for: object, authorization: SecureBytes(zeros: 0))
        }
        #expect(error?.isAuthorizationFailure == true)
    }

    @Test func anotherCAOrAnotherTPMsCertificateIsRefused() throws {
        let stranger = try SoftwareTPM(certified: true)
        let strangerIdentity = try identity(of: TPM(tcti: stranger.tcti))
        #expect(strangerIdentity.attestationKey != (try identity(of: tpm)).attestationKey)
        // Its CA is not ours.
        let error = #expect(throws: TPMAttestationError.self) { try verifier.challenge(for: strangerIdentity) }
        #expect(error?.description.hasPrefix("the endorsement certificate does not chain to a trusted CA") == true)
        // Our TPM's certificate presented with the stranger's endorsement key.
        var borrowed = strangerIdentity
        borrowed.endorsementCertificate = try identity(of: tpm).endorsementCertificate
        let mismatch = #expect(throws: TPMAttestationError.self) { try verifier.challenge(for: borrowed) }
        #expect(mismatch?.description == "the endorsement certificate is for another key")
    }

    @Test func aTPMWithoutCertificateNeedsAPinnedEndorsementKey() throws {
        let bare = try SoftwareTPM()
        let bareTPM = TPM(tcti: bare.tcti)
        let identity = try identity(of: bareTPM)
        #expect(identity.endorsementCertificate == nil)
        let error = #expect(throws: TPMAttestationError.self) { try verifier.challenge(for: identity) }
        #expect(error?.description == "the TPM has no endorsement certificate and its endorsement key is not pinned")

        let pinning = try TPMAttestationVerifier(trustedRoots: [], pinnedEndorsementKeys: [identity.endorsementKey])
        let authorization = try SecureBytes(randomCount: 32)
        let (object, publicKey) = try bareTPM.withConnection { try $0.createP256Key(authorization: authorization) }
        let (challenge, expectation) = try pinning.challenge(for: identity)
        let attestation = try answer(challenge, for: object, authorization: authorization, on: bareTPM)
        #expect(try pinning.verify(attestation, expecting: expectation).publicKey == publicKey)
    }

    /// The forger's way: present a software key as the attestation key (so it can sign any statement), with the
    /// real TPM's certified endorsement key. The verifier cannot tell the key apart by its public area, but the
    /// credential opens only in the TPM with an object of that name loaded, and an outside key loads there as a
    /// public area only, which no authorization can use: tpm2-tools (`tpm2_loadexternal`, then
    /// `tpm2_activatecredential` through the endorsement policy) gets no credential out. A statement signed with
    /// the software key and a guessed nonce is then refused.
    @Test func aSoftwareAttestationKeyGetsNoCredentialAndForgesNothing() throws {
        let genuine = try identity(of: tpm)
        let softwareKey = try P256.PrivateKey()
        var forged = genuine
        forged.attestationKey = try Self.replacingPoint(of: genuine.attestationKey, with: softwareKey.publicKey)
        let (challenge, expectation) = try verifier.challenge(for: forged)

        // The forger loads its key's public area into the TPM and asks for the credential.
        let forgedRun = try activateWithTools(challenge, attestationKey: forged.attestationKey, directory: "forger")
        #expect(!forgedRun.activated, "\(forgedRun.output)")
        // TPM_RC_AUTH_UNAVAILABLE: an object loaded as a public area alone has no authorization to use.
        #expect(forgedRun.output.contains("Esys_ActivateCredential(0x12F)"), "\(forgedRun.output)")
        // The control: the same tools, the same steps, with the TPM's own attestation key made from its template.
        let (genuineChallenge, _) = try verifier.challenge(for: genuine)
        let control = try activateWithTools(genuineChallenge, attestationKey: nil, directory: "control")
        #expect(control.activated, "\(control.output)")

        // Without the credential, the forger's statement carries some other nonce.
        let statement = try Self.certifyStatement(
            nonce: try SecureRandom.bytes(32), name: Data([0, 0x0B]) + Data(count: 32))
        let signature = try softwareKey.signature(for: statement).rawRepresentation
        let error = #expect(throws: TPMAttestationError.self) {
            try verifier.verify(
                TPMKeyAttestation(keyPublicArea: Data(), statement: statement, signature: signature),
                expecting: expectation)
        }
        #expect(error?.description == "the statement answers another challenge")
    }

    /// Runs tpm2-tools' credential activation on this TPM: the endorsement key through its policy, and
    /// `attestationKey` loaded as an outside public area, or (nil) the attestation key made by
    /// `tpm2_createprimary` from our template. swtpm has no resource manager and each tool leaves its objects loaded,
    /// so they are flushed between steps (the saved contexts stay loadable).
    func activateWithTools(
        _ challenge: TPMAttestationChallenge, attestationKey: Data?, directory: String
    ) throws -> (activated: Bool, output: String) {
        let work = machine.stateDirectory.appendingPathComponent(directory, isDirectory: true)
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        func sized(_ data: Data) -> Data { Data([UInt8(data.count >> 8), UInt8(data.count & 0xFF)]) + data }
        // tpm2-tools' credential file: magic, version, then the TPM2B_ID_OBJECT and TPM2B_ENCRYPTED_SECRET.
        try
            (Data([0xBA, 0xDC, 0xC0, 0xDE, 0, 0, 0, 1]) + sized(challenge.credentialBlob)
            + sized(challenge.encryptedSecret)).write(to: work.appendingPathComponent("credential"))
        let loadAttestationKey: String
        if let attestationKey {
            try sized(attestationKey).write(to: work.appendingPathComponent("ak.pub"))
            loadAttestationKey = "tpm2_loadexternal -C e -u ak.pub -c ak.ctx"
        } else {
            loadAttestationKey =
                "tpm2_createprimary -C e -G ecc256:ecdsa-sha256:null -c ak.ctx "
                + "-a 'fixedtpm|fixedparent|sensitivedataorigin|userwithauth|restricted|sign|noda'"
        }
        let script = """
            set -e
            tpm2_flushcontext -t; tpm2_flushcontext -s
            tpm2_createek -c ek.ctx -G rsa >/dev/null; tpm2_flushcontext -t
            \(loadAttestationKey) >/dev/null; tpm2_flushcontext -t
            tpm2_startauthsession --policy-session -S session.ctx
            tpm2_policysecret -S session.ctx -c e >/dev/null
            tpm2_activatecredential -c ak.ctx -C ek.ctx -i credential -o opened -P session:session.ctx
            tpm2_flushcontext -t; tpm2_flushcontext -s
            echo activated
            """
        var environment = inheritedEnvironment()
        environment["TPM2TOOLS_TCTI"] = machine.tcti
        let run = try runCapturingOutput(
            URL(fileURLWithPath: "/bin/sh"), ["-c", "cd '\(work.path)' && \(script)"], environment: environment)
        let opened = FileManager.default.fileExists(atPath: work.appendingPathComponent("opened").path)
        return (run.status == 0 && run.output.contains("activated") && opened, run.output)
    }

    /// A `TPMT_PUBLIC` of an ECC P-256 key with its point replaced (the last 2 + 32 + 2 + 32 bytes).
    static func replacingPoint(of area: Data, with key: P256.PublicKey) throws -> Data {
        let point = key.x963Representation
        return area.dropLast(68) + Data([0, 32]) + point[point.startIndex + 1..<point.startIndex + 33] + Data([0, 32])
            + point[point.startIndex + 33..<point.startIndex + 65]
    }

    /// A certify `TPMS_ATTEST` with the TPM's magic, as a forger would write one.
    static func certifyStatement(nonce: Data, name: Data) throws -> Data {
        func sized(_ data: Data) -> Data { Data([UInt8(data.count >> 8), UInt8(data.count & 0xFF)]) + data }
        return Data([0xFF, 0x54, 0x43, 0x47, 0x80, 0x17]) + sized(Data()) + sized(nonce) + Data(count: 17 + 8)
            + sized(name) + sized(Data())
    }
}

/// `lactl keys identity` and `lactl keys attest` as a person runs them: JSON a verifier takes, for an SSH key (a
/// persisted right) in a store on the TPM; the software backend says it cannot.
@Suite(.enabled(if: SoftwareTPM.isInstalled, "swtpm is not installed (scripts/bootstrap installs it)"))
struct LactlKeyAttestationTests {
    @Test func lactlAttestsAnSSHKey() throws {
        let machine = try SoftwareTPM(certified: true)
        let verifier = try KeyAttestationTests.verifier(trusting: machine)
        let store = machine.stateDirectory.appendingPathComponent("store", isDirectory: true)
        var environment = inheritedEnvironment(merging: machine.environment)
        environment["LA_DAEMON_SOCKET"] = ""
        environment["LA_DATA_DIR"] = store.path
        environment["LA_READER_DRIVERS"] = "no_such_driver"
        let lactl = try lactlExecutable()

        let created = try runCapturingOutput(
            lactl, ["ssh-key", "create", "deploy", "--requirement", "userPresence"], environment: environment)
        #expect(created.status == 0, "\(created.output)")
        // The authorized_keys blob ends with the key's 65-byte point.
        let blob = try #require(Data(base64Encoded: String(created.output.split(separator: " ")[1])))
        let sshPublicKey = blob.suffix(65)

        let identityRun = try runCapturingOutput(lactl, ["keys", "identity"], environment: environment)
        #expect(identityRun.status == 0, "\(identityRun.output)")
        let identity = try JSONDecoder().decode(TPMIdentity.self, from: Data(identityRun.output.utf8))
        let (challenge, expectation) = try verifier.challenge(for: identity)
        let challengeFile = machine.stateDirectory.appendingPathComponent("challenge.json")
        try JSONEncoder().encode(challenge).write(to: challengeFile)

        let attestRun = try runCapturingOutput(
            lactl, ["keys", "attest", "--ssh-key", "deploy", "--challenge", challengeFile.path],
            environment: environment)
        #expect(attestRun.status == 0, "\(attestRun.output)")
        let attestation = try JSONDecoder().decode(TPMKeyAttestation.self, from: Data(attestRun.output.utf8))
        #expect(try verifier.verify(attestation, expecting: expectation).publicKey == sshPublicKey)

        // The same challenge for a key that does not exist, and a file that is not a challenge.
        let missing = try runCapturingOutput(
            lactl, ["keys", "attest", "--ssh-key", "nope", "--challenge", challengeFile.path], environment: environment)
        #expect(missing.status == 44, "\(missing.output)")
        let notJSON = try runCapturingOutput(
            lactl, ["keys", "attest", "--ssh-key", "deploy", "--challenge", "/etc/hostname"], environment: environment)
        #expect(notJSON.status == 65 && notJSON.output.contains("is not a challenge"), "\(notJSON.output)")

        environment["LA_ENCLAVE"] = "software"
        environment["LA_DATA_DIR"] = store.path + "-software"
        let software = try runCapturingOutput(lactl, ["keys", "identity"], environment: environment)
        #expect(software.status != 0)
        #expect(software.output.contains("no TPM holds this store's keys (software backend)"), "\(software.output)")
    }
}
