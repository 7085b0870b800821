import Foundation
import SecureCrypto
import TestSupport
import Testing
import TrustedPlatform

/// tpm2-tss against a real TPM (swtpm): sealing, P-256 keys made and used inside it, and what another TPM, a wrong
/// authorization or changed bytes get.
@Suite(.enabled(if: SoftwareTPM.isInstalled, "swtpm is not installed (scripts/bootstrap installs it)"))
struct TPMConnectionTests {
    let machine: SoftwareTPM
    var tpm: TPM { TPM(tcti: machine.tcti) }

    init() throws {
        machine = try SoftwareTPM()
    }

    @Test func sealedSecretOpensWithItsAuthorizationOnly() throws {
        let secret = try SecureBytes(randomCount: 32)
        let authorization = try SecureBytes(randomCount: 32)
        let object = try tpm.withConnection { try $0.seal(secret, authorization: authorization) }
        #expect(!object.serialized.contains(secret.unprotectedData()))
        let reopened = try TPMObject(serialized: object.serialized)
        #expect(try tpm.withConnection { try $0.unseal(reopened, authorization: authorization) } == secret)

        let wrong = try SecureBytes(randomCount: 32)
        let error = #expect(throws: TPMError.self) {
            try tpm.withConnection { try $0.unseal(object, authorization: wrong) }
        }
        #expect(error?.isAuthorizationFailure == true)
    }

    @Test func sealedSecretDoesNotOpenInAnotherTPM() throws {
        let secret = try SecureBytes(randomCount: 32)
        let object = try tpm.withConnection { try $0.seal(secret, authorization: SecureBytes(zeros: 0)) }
        let other = try SoftwareTPM()
        let error = #expect(throws: TPMError.self) {
            try TPM(tcti: other.tcti).withConnection { try $0.unseal(object, authorization: SecureBytes(zeros: 0)) }
        }
        #expect(error?.isForeignObject == true, "\(String(describing: error))")
    }

    @Test func changedBytesDoNotLoad() throws {
        let object = try tpm.withConnection {
            try $0.seal(try SecureBytes(randomCount: 32), authorization: SecureBytes(zeros: 0))
        }
        var changed = object
        var privateBytes = [UInt8](changed.privateArea)
        privateBytes[privateBytes.count - 3] ^= 1
        changed.privateArea = Data(privateBytes)
        #expect(throws: TPMError.self) {
            try tpm.withConnection { try $0.unseal(changed, authorization: SecureBytes(zeros: 0)) }
        }
        #expect(throws: TPMError.self) { try TPMObject(serialized: object.serialized + Data([0])) }
    }

    @Test func p256SignaturesVerifyWithOpenSSL() throws {
        let authorization = try SecureBytes(randomCount: 32)
        let (object, publicBytes) = try tpm.withConnection { try $0.createP256Key(authorization: authorization) }
        let publicKey = try P256.PublicKey(x963Representation: publicBytes)
        let message = Data("challenge".utf8)
        let digest = Data(SHA256.hash(message))
        let (r, s) = try tpm.withConnection { connection in
            let key = try connection.load(object, authorization: authorization)
            return try connection.sign(digest, with: key)
        }
        let signature = try ECDSASignature(rawRepresentation: r + s)
        #expect(publicKey.isValidSignature(signature, for: message))
        #expect(!publicKey.isValidSignature(signature, for: Data("other".utf8)))

        let error = #expect(throws: TPMError.self) {
            try tpm.withConnection { connection in
                try connection.sign(digest, with: try connection.load(object, authorization: SecureBytes(zeros: 0)))
            }
        }
        #expect(error?.isAuthorizationFailure == true)
    }

    @Test func ecdhAgreesWithSoftwareECDH() throws {
        let authorization = try SecureBytes(randomCount: 16)
        let (object, publicBytes) = try tpm.withConnection { try $0.createP256Key(authorization: authorization) }
        let peer = try P256.PrivateKey()
        let inTPM = try tpm.withConnection { connection in
            try connection.sharedSecret(
                with: try connection.load(object, authorization: authorization),
                point: peer.publicKey.x963Representation)
        }
        let outside = try peer.sharedSecret(with: try P256.PublicKey(x963Representation: publicBytes))
        #expect(inTPM == outside)
    }

    @Test func objectsLeftByAKilledHolderAreFlushed() throws {
        // swtpm holds three transient objects; a holder that dies keeps its storage key and key loaded, and without
        // the next holder's clean-up the second round could not load anything.
        for _ in 0..<4 {
            let connection = try TPMConnection(tcti: machine.tcti)
            _ = try connection.load(
                try connection.createP256Key(authorization: SecureBytes(zeros: 0)).object,
                authorization: SecureBytes(zeros: 0))
            connection.abandon()
            #expect(
                try tpm.withConnection { try $0.createP256Key(authorization: SecureBytes(zeros: 0)) }.publicKey.count
                    == 65)
        }
        let information = try tpm.withConnection { try $0.information() }
        #expect(information.manufacturer == "IBM")
        #expect(information.vendor.hasPrefix("SW"))
    }
}
