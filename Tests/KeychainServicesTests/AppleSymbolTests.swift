import Foundation
import KeychainServices
import Testing

/// Issue "Apple compatibility measured on real code", item 1: symbols widely used keychain wrappers call, each
/// pinned by the Apple-style line that did not compile or answered differently before.
@Suite("Apple symbols the wrappers call")
struct AppleSymbolTests {
    /// `noErr` (MacTypes.h) is what older wrappers compare statuses with.
    @Test func noErrIsZeroAndComparesWithStatuses() throws {
        try TestStore().with {
            let status = SecItemAdd(
                [
                    kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "a",
                    kSecValueData as String: Data("x".utf8),
                ] as CFDictionary, nil)
            #expect(status == noErr)
        }
    }

    /// Security/SecBase.h: every non-deprecated code with Apple's value and message (SecErrorMessages.strings is
    /// made from the header's comments).
    @Test func secBaseCodesHaveApplesValuesAndMessages() {
        #expect(errSecOpWr == -49)
        #expect(errSecWrPerm == -61)
        #expect(errSecNoStorageModule == -25312)
        #expect(errSecACLNotSimple == -25240)
        #expect(errSecCertificateIsCA == -67902)
        #expect(SecCopyErrorMessageString(errSecOpWr, nil) as String? == "File already open with write permission.")
        #expect(
            SecCopyErrorMessageString(errSecItemNotFound, nil) as String?
                == "The specified item could not be found in the keychain.")
        #expect(SecCopyErrorMessageString(errSecInternalComponent, nil) != nil)
    }

    /// Security/SecRandom.h: `SecRandomCopyBytes(kSecRandomDefault, count, &bytes)`.
    @Test func secRandomCopyBytesFillsTheBuffer() {
        var first = [UInt8](repeating: 0, count: 32)
        var second = [UInt8](repeating: 0, count: 32)
        #expect(SecRandomCopyBytes(kSecRandomDefault, first.count, &first) == errSecSuccess)
        #expect(SecRandomCopyBytes(kSecRandomDefault, second.count, &second) == errSecSuccess)
        #expect(first != second)
        #expect(first != [UInt8](repeating: 0, count: 32))
        var none = [UInt8]()
        #expect(SecRandomCopyBytes(kSecRandomDefault, 0, &none) == errSecSuccess)
    }

    /// `kSecAttrPersistentReference` ("persistref", SecItem.h): among the returned attributes, and usable in a
    /// query like `kSecValuePersistentRef`.
    @Test func persistentReferenceIsAnAttributeAndAQueryKey() throws {
        try TestStore().with {
            var added: CFTypeRef?
            #expect(
                SecItemAdd(
                    [
                        kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "p",
                        kSecValueData as String: Data("x".utf8), kSecReturnPersistentRef as String: true,
                    ] as CFDictionary,
                    &added) == errSecSuccess)
            let reference = try #require(added as? Data)
            var found: CFTypeRef?
            #expect(
                SecItemCopyMatching(
                    [
                        kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "p",
                        kSecReturnAttributes as String: true,
                    ] as CFDictionary, &found) == errSecSuccess)
            let attributes = try #require(found as? [String: Any])
            #expect(attributes[kSecAttrPersistentReference as String] as? Data == reference)
            var data: CFTypeRef?
            #expect(
                SecItemCopyMatching(
                    [kSecAttrPersistentReference as String: reference, kSecReturnData as String: true] as CFDictionary,
                    &data) == errSecSuccess)
            #expect(data as? Data == Data("x".utf8))
        }
    }

    /// CFBase.h / CFError.h: `CFGetTypeID(ref) == SecKeyGetTypeID()`, and reading a status out of a `CFError`.
    @Test func typeIDsAndCFErrorAccessorsWork() throws {
        let parameters: [String: Any] = [
            kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits as String: 256,
        ]
        var error: Unmanaged<CFError>?
        let key = try #require(SecKeyCreateRandomKey(parameters as CFDictionary, &error))
        let asAny: CFTypeRef = key
        #expect(CFGetTypeID(asAny) == SecKeyGetTypeID())
        #expect(CFGetTypeID(asAny) != SecAccessControlGetTypeID())
        let access = try #require(
            SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, .userPresence, nil))
        #expect(CFGetTypeID(access) == SecAccessControlGetTypeID())
        #expect(SecCertificateGetTypeID() != SecIdentityGetTypeID())

        let refused = SecKeyCreateWithData(
            Data([1, 2, 3]) as CFData,
            [
                kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom,
                kSecAttrKeyClass as String: kSecAttrKeyClassPublic,
            ] as CFDictionary, &error)
        #expect(refused == nil)
        let cfError = try #require(error?.takeRetainedValue())
        #expect(CFErrorGetCode(cfError) == Int(errSecDecode))
        #expect(CFErrorGetDomain(cfError) as String == NSOSStatusErrorDomain)
        #expect(CFErrorCopyUserInfo(cfError) != nil)
        #expect(!(CFErrorCopyDescription(cfError) as String).isEmpty)
    }

    /// Item 2: CF types as Apple shapes them. `CFString` constants are objects (`AnyObject`, `CFTypeRef`),
    /// `kCFBooleanTrue` is implicitly unwrapped, and the three ways Apple code writes a query all work.
    @Test func cfTypesAreShapedAsApplesAre() throws {
        try TestStore().with {
            let asObject: CFTypeRef = kSecClassGenericPassword
            #expect(asObject as? String == "genp")
            let objects: [String: AnyObject] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "o" as AnyObject,
                kSecValueData as String: Data("1".utf8) as AnyObject, kSecReturnData as String: kCFBooleanTrue!,
            ]
            var added: CFTypeRef?
            #expect(SecItemAdd(objects as CFDictionary, &added) == errSecSuccess)
            #expect(added as? Data == Data("1".utf8))
            let keyed =
                [
                    kSecClass: kSecClassGenericPassword, kSecAttrAccount: "o" as CFString,
                    kSecReturnData: kCFBooleanTrue!,
                ]
                as CFDictionary
            var found: CFTypeRef?
            #expect(SecItemCopyMatching(keyed, &found) == errSecSuccess)
            #expect(found as? Data == Data("1".utf8))
            let strings: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "o",
            ]
            #expect(SecItemDelete(strings as CFDictionary) == errSecSuccess)
            let flag: Bool = kCFBooleanFalse.boolValue
            #expect(!flag)
        }
    }
}
