// Built with -warnings-as-errors (Package.swift): code that ignores what Keychain Services and LocalAuthentication
// return, as clean-up paths written for Apple's platforms do, compiles without a warning, because Swift imports every
// C function and Objective-C method of Apple's frameworks as discardable. Without `@discardableResult` on ours, each
// call below is a "result unused" warning, here an error: the build of `make test` fails.
import Foundation
import KeychainServices
import LocalAuthentication

/// Never called: compiling it is the test.
func ignoreEveryResult(key: SecKey, publicKey: SecKey, identity: SecIdentity, context: LAContext) async throws {
    let query = [kSecClass as String: kSecClassGenericPassword] as CFDictionary
    SecItemAdd(query, nil)
    SecItemCopyMatching(query, nil)
    SecItemUpdate(query, query)
    SecItemDelete(query)
    SecKeyCreateRandomKey(query, nil)
    SecKeyCopyPublicKey(key)
    SecKeyCopyExternalRepresentation(key, nil)
    SecKeyCreateWithData(Data() as CFData, query, nil)
    SecKeyCopyAttributes(key)
    SecKeyIsAlgorithmSupported(key, .sign, .ecdsaSignatureMessageX962SHA256)
    SecKeyCreateSignature(key, .ecdsaSignatureMessageX962SHA256, Data() as CFData, nil)
    SecKeyVerifySignature(publicKey, .ecdsaSignatureMessageX962SHA256, Data() as CFData, Data() as CFData, nil)
    SecKeyCreateEncryptedData(publicKey, .eciesEncryptionCofactorX963SHA256AESGCM, Data() as CFData, nil)
    SecKeyCreateDecryptedData(key, .eciesEncryptionCofactorX963SHA256AESGCM, Data() as CFData, nil)
    SecKeyCopyKeyExchangeResult(key, .ecdhKeyExchangeStandard, publicKey, query, nil)
    SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, .userPresence, nil)
    var access: SecAccess?
    SecAccessCreate("item" as CFString, nil, &access)
    var application: SecTrustedApplication?
    SecTrustedApplicationCreateFromPath(nil, &application)
    var certificate: SecCertificate?
    SecIdentityCopyCertificate(identity, &certificate)
    var bytes = [UInt8](repeating: 0, count: 16)
    SecRandomCopyBytes(kSecRandomDefault, bytes.count, &bytes)
    SecCopyErrorMessageString(errSecItemNotFound, nil)
    context.canEvaluatePolicy(.deviceOwnerAuthentication, error: nil)
    try await context.evaluatePolicy(.deviceOwnerAuthentication, localizedReason: "ignored")
    context.setCredential(nil, type: .applicationPassword)
    context.isCredentialSet(.applicationPassword)
}

print("compiled without a warning: every result may be ignored, as on Apple's platforms")
_ = ignoreEveryResult
