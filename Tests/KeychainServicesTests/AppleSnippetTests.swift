import Foundation
import KeychainServices
import Testing

/// Code written for Apple platforms, unchanged.
@Suite("Apple-style SecItem code")
struct AppleSnippetTests {
    @Test func appleSnippetCompilesUnchangedAndRoundTrips() throws {
        let store = TestStore()
        try store.with {
            let account = "alice@example.com"
            let password = "correct horse battery staple".data(using: .utf8)!
            let query: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword,
                kSecAttrAccount as String: account,
                kSecAttrService as String: "com.example.app",
                kSecValueData as String: password,
            ]
            let addStatus = SecItemAdd(query as CFDictionary, nil)
            #expect(addStatus == errSecSuccess)

            let search: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword,
                kSecAttrAccount as String: account,
                kSecAttrService as String: "com.example.app",
                kSecMatchLimit as String: kSecMatchLimitOne,
                kSecReturnData as String: true,
            ]
            var item: CFTypeRef?
            let status = SecItemCopyMatching(search as CFDictionary, &item)
            #expect(status == errSecSuccess)
            #expect(item as? Data == password)

            let attributes: [String: Any] = [kSecValueData as String: "new".data(using: .utf8)!]
            #expect(
                SecItemUpdate(
                    query.filter { $0.key != kSecValueData as String } as CFDictionary,
                    attributes as CFDictionary) == errSecSuccess)
            #expect(
                SecItemDelete([kSecClass: kSecClassGenericPassword, kSecAttrAccount: account] as CFDictionary)
                    == errSecSuccess)
            #expect(SecItemCopyMatching(search as CFDictionary, &item) == errSecItemNotFound)
        }
    }

    @Test func dictionaryLiteralWithCFStringKeysAndCFBooleans() throws {
        let store = TestStore()
        try store.with {
            let add =
                [
                    kSecClass: kSecClassInternetPassword, kSecAttrServer: "example.com", kSecAttrAccount: "bob",
                    kSecAttrPort: 443, kSecAttrProtocol: kSecAttrProtocolHTTPS, kSecValueData: Data("pw".utf8),
                ] as CFDictionary
            #expect(SecItemAdd(add, nil) == errSecSuccess)
            let query =
                [
                    kSecClass: kSecClassInternetPassword, kSecAttrServer: "example.com",
                    kSecReturnAttributes: kCFBooleanTrue as Any, kSecReturnData: kCFBooleanTrue as Any,
                ] as CFDictionary
            var result: AnyObject?
            #expect(SecItemCopyMatching(query, &result) == errSecSuccess)
            let dictionary = result as? [String: Any]
            #expect(dictionary?[kSecAttrAccount as String] as? String == "bob")
            #expect(dictionary?[kSecAttrPort as String] as? Int == 443)
            #expect(dictionary?[kSecValueData as String] as? Data == Data("pw".utf8))
        }
    }

    @Test func errorMessagesAndConstantsUseApplesValues() {
        #expect(
            SecCopyErrorMessageString(errSecItemNotFound, nil)
                == "The specified item could not be found in the keychain.")
        #expect(
            SecCopyErrorMessageString(errSecDuplicateItem, nil) == "The specified item already exists in the keychain.")
        #expect(errSecDuplicateItem == -25299 && errSecItemNotFound == -25300 && errSecParam == -50)
        #expect(errSecInteractionNotAllowed == -25308 && errSecMissingEntitlement == -34018 && errSecDecode == -26275)
        #expect(kSecClassGenericPassword == "genp" && kSecAttrAccessible == "pdmn" && kSecMatchLimitAll == "m_LimitAll")
        #expect(kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly == "akpu" && kSecUseAuthenticationUISkip == "u_AuthUIS")
        #expect(SecAccessControlCreateFlags.biometryCurrentSet.rawValue == 8)
        #expect(SecAccessControlCreateFlags.applicationPassword.rawValue == 0x8000_0000)
    }
}
