// Every kSec… constant with the literal string Apple's Security framework uses (SecItemConstants.c), so
// dictionaries built here and on Apple platforms hold the same keys and values.

import SecurityProtocol

// MARK: Classes

/// The key of an item's class.
nonisolated(unsafe) public let kSecClass: CFString = ConstantString(ItemKey.itemClass)
/// Generic password items.
nonisolated(unsafe) public let kSecClassGenericPassword: CFString = ConstantString("genp")
/// Internet password items.
nonisolated(unsafe) public let kSecClassInternetPassword: CFString = ConstantString("inet")
/// Certificate items.
nonisolated(unsafe) public let kSecClassCertificate: CFString = ConstantString("cert")
/// Cryptographic key items.
nonisolated(unsafe) public let kSecClassKey: CFString = ConstantString("keys")
/// Identity items: a certificate with its private key.
nonisolated(unsafe) public let kSecClassIdentity: CFString = ConstantString("idnt")

// MARK: Attributes

/// When the item's data can be read (a `kSecAttrAccessible…` value).
nonisolated(unsafe) public let kSecAttrAccessible: CFString = ConstantString(ItemKey.accessible)
/// The item's `SecAccessControl`.
nonisolated(unsafe) public let kSecAttrAccessControl: CFString = ConstantString(ItemKey.accessControl)
/// The item's trusted-application list, a `SecAccess` (macOS; exclusive with `kSecAttrAccessControl`).
nonisolated(unsafe) public let kSecAttrAccess: CFString = ConstantString("acls")
/// The item's keychain access group.
nonisolated(unsafe) public let kSecAttrAccessGroup: CFString = ConstantString(ItemKey.accessGroup)
/// Whether the item is synchronizable (`true`, `false`, or `kSecAttrSynchronizableAny` in queries).
nonisolated(unsafe) public let kSecAttrSynchronizable: CFString = ConstantString(ItemKey.synchronizable)
/// Matches synchronizable and non-synchronizable items.
nonisolated(unsafe) public let kSecAttrSynchronizableAny: CFString = ConstantString("syna")
/// A view hint for synchronization.
nonisolated(unsafe) public let kSecAttrSyncViewHint: CFString = ConstantString("vwht")
/// When the item was created (read-only).
nonisolated(unsafe) public let kSecAttrCreationDate: CFString = ConstantString("cdat")
/// When the item was last changed (read-only).
nonisolated(unsafe) public let kSecAttrModificationDate: CFString = ConstantString("mdat")
/// A user-visible description.
nonisolated(unsafe) public let kSecAttrDescription: CFString = ConstantString("desc")
/// A user-editable comment.
nonisolated(unsafe) public let kSecAttrComment: CFString = ConstantString("icmt")
/// The creator code (a number).
nonisolated(unsafe) public let kSecAttrCreator: CFString = ConstantString("crtr")
/// The item type code (a number) for passwords; the key type for keys.
nonisolated(unsafe) public let kSecAttrType: CFString = ConstantString("type")
/// A user-visible label.
nonisolated(unsafe) public let kSecAttrLabel: CFString = ConstantString(ItemKey.label)
/// Whether the item is hidden.
nonisolated(unsafe) public let kSecAttrIsInvisible: CFString = ConstantString("invi")
/// Whether the item marks a password the user declined to save.
nonisolated(unsafe) public let kSecAttrIsNegative: CFString = ConstantString("nega")
/// The account name.
nonisolated(unsafe) public let kSecAttrAccount: CFString = ConstantString(ItemKey.account)
/// The service name of a generic password.
nonisolated(unsafe) public let kSecAttrService: CFString = ConstantString(ItemKey.service)
/// Application data of a generic password.
nonisolated(unsafe) public let kSecAttrGeneric: CFString = ConstantString("gena")
/// The security domain of an internet password.
nonisolated(unsafe) public let kSecAttrSecurityDomain: CFString = ConstantString("sdmn")
/// The server of an internet password.
nonisolated(unsafe) public let kSecAttrServer: CFString = ConstantString("srvr")
/// The protocol of an internet password (a `kSecAttrProtocol…` value).
nonisolated(unsafe) public let kSecAttrProtocol: CFString = ConstantString("ptcl")
/// The authentication scheme of an internet password (a `kSecAttrAuthenticationType…` value).
nonisolated(unsafe) public let kSecAttrAuthenticationType: CFString = ConstantString("atyp")
/// The port of an internet password (a number).
nonisolated(unsafe) public let kSecAttrPort: CFString = ConstantString("port")
/// The path of an internet password.
nonisolated(unsafe) public let kSecAttrPath: CFString = ConstantString("path")
/// A certificate's subject (DER).
nonisolated(unsafe) public let kSecAttrSubject: CFString = ConstantString("subj")
/// A certificate's issuer (DER).
nonisolated(unsafe) public let kSecAttrIssuer: CFString = ConstantString("issr")
/// A certificate's serial number.
nonisolated(unsafe) public let kSecAttrSerialNumber: CFString = ConstantString("slnr")
/// A certificate's subject key identifier.
nonisolated(unsafe) public let kSecAttrSubjectKeyID: CFString = ConstantString("skid")
/// A certificate's public-key hash.
nonisolated(unsafe) public let kSecAttrPublicKeyHash: CFString = ConstantString("pkhh")
/// A certificate's type (a number).
nonisolated(unsafe) public let kSecAttrCertificateType: CFString = ConstantString("ctyp")
/// A certificate's encoding (a number).
nonisolated(unsafe) public let kSecAttrCertificateEncoding: CFString = ConstantString("cenc")
/// A key's class (`kSecAttrKeyClassPublic`, `…Private`, `…Symmetric`).
nonisolated(unsafe) public let kSecAttrKeyClass: CFString = ConstantString("kcls")
/// A key's application label (for EC keys: SHA-1 of the public key).
nonisolated(unsafe) public let kSecAttrApplicationLabel: CFString = ConstantString("klbl")
/// Whether a key is stored permanently.
nonisolated(unsafe) public let kSecAttrIsPermanent: CFString = ConstantString("perm")
/// Whether a key is sensitive (macOS).
nonisolated(unsafe) public let kSecAttrIsSensitive: CFString = ConstantString("sens")
/// Whether a key is extractable (macOS).
nonisolated(unsafe) public let kSecAttrIsExtractable: CFString = ConstantString("extr")
/// A key's application tag (data).
nonisolated(unsafe) public let kSecAttrApplicationTag: CFString = ConstantString("atag")
/// A key's algorithm (a `kSecAttrKeyType…` value).
nonisolated(unsafe) public let kSecAttrKeyType: CFString = ConstantString("type")
/// A key's size in bits.
nonisolated(unsafe) public let kSecAttrKeySizeInBits: CFString = ConstantString("bsiz")
/// A key's effective size in bits.
nonisolated(unsafe) public let kSecAttrEffectiveKeySize: CFString = ConstantString("esiz")
/// Whether a key can encrypt.
nonisolated(unsafe) public let kSecAttrCanEncrypt: CFString = ConstantString("encr")
/// Whether a key can decrypt.
nonisolated(unsafe) public let kSecAttrCanDecrypt: CFString = ConstantString("decr")
/// Whether a key can derive other keys.
nonisolated(unsafe) public let kSecAttrCanDerive: CFString = ConstantString("drve")
/// Whether a key can sign.
nonisolated(unsafe) public let kSecAttrCanSign: CFString = ConstantString("sign")
/// Whether a key can verify.
nonisolated(unsafe) public let kSecAttrCanVerify: CFString = ConstantString("vrfy")
/// Whether a key can wrap other keys.
nonisolated(unsafe) public let kSecAttrCanWrap: CFString = ConstantString("wrap")
/// Whether a key can unwrap other keys.
nonisolated(unsafe) public let kSecAttrCanUnwrap: CFString = ConstantString("unwp")
/// The token holding a key.
nonisolated(unsafe) public let kSecAttrTokenID: CFString = ConstantString("tkid")
/// The Secure Enclave token (here: the software enclave).
nonisolated(unsafe) public let kSecAttrTokenIDSecureEnclave: CFString = ConstantString("com.apple.setoken")
/// The access group of token items.
nonisolated(unsafe) public let kSecAttrAccessGroupToken: CFString = ConstantString("com.apple.token")

// MARK: Accessibility

/// Readable only while the device is unlocked; only if a passcode is set; never leaves the device.
nonisolated(unsafe) public let kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly: CFString = ConstantString("akpu")
/// Readable only while unlocked (the default).
nonisolated(unsafe) public let kSecAttrAccessibleWhenUnlocked: CFString = ConstantString("ak")
/// Readable only while unlocked; never leaves the device.
nonisolated(unsafe) public let kSecAttrAccessibleWhenUnlockedThisDeviceOnly: CFString = ConstantString("aku")
/// Readable after the first unlock since boot.
nonisolated(unsafe) public let kSecAttrAccessibleAfterFirstUnlock: CFString = ConstantString("ck")
/// Readable after the first unlock since boot; never leaves the device.
nonisolated(unsafe) public let kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly: CFString = ConstantString("cku")
/// Always readable (deprecated by Apple).
nonisolated(unsafe) public let kSecAttrAccessibleAlways: CFString = ConstantString("dk")
/// Always readable; never leaves the device (deprecated by Apple).
nonisolated(unsafe) public let kSecAttrAccessibleAlwaysThisDeviceOnly: CFString = ConstantString("dku")

// MARK: Key classes and types

/// A public key.
nonisolated(unsafe) public let kSecAttrKeyClassPublic: CFString = ConstantString("0")
/// A private key.
nonisolated(unsafe) public let kSecAttrKeyClassPrivate: CFString = ConstantString("1")
/// A symmetric key.
nonisolated(unsafe) public let kSecAttrKeyClassSymmetric: CFString = ConstantString("2")
/// RSA.
nonisolated(unsafe) public let kSecAttrKeyTypeRSA: CFString = ConstantString("42")
/// Elliptic curve (same value as `kSecAttrKeyTypeECSECPrimeRandom`).
nonisolated(unsafe) public let kSecAttrKeyTypeEC: CFString = ConstantString("73")
/// Elliptic curve over a prime field (P-256 here).
nonisolated(unsafe) public let kSecAttrKeyTypeECSECPrimeRandom: CFString = ConstantString("73")
/// Attributes of the private key, in `SecKeyCreateRandomKey`'s parameters.
nonisolated(unsafe) public let kSecPrivateKeyAttrs: CFString = ConstantString("private")
/// Attributes of the public key, in `SecKeyCreateRandomKey`'s parameters.
nonisolated(unsafe) public let kSecPublicKeyAttrs: CFString = ConstantString("public")

// MARK: Internet protocols

/// FTP.
nonisolated(unsafe) public let kSecAttrProtocolFTP: CFString = ConstantString("ftp ")
/// FTP account.
nonisolated(unsafe) public let kSecAttrProtocolFTPAccount: CFString = ConstantString("ftpa")
/// HTTP.
nonisolated(unsafe) public let kSecAttrProtocolHTTP: CFString = ConstantString("http")
/// IRC.
nonisolated(unsafe) public let kSecAttrProtocolIRC: CFString = ConstantString("irc ")
/// NNTP.
nonisolated(unsafe) public let kSecAttrProtocolNNTP: CFString = ConstantString("nntp")
/// POP3.
nonisolated(unsafe) public let kSecAttrProtocolPOP3: CFString = ConstantString("pop3")
/// SMTP.
nonisolated(unsafe) public let kSecAttrProtocolSMTP: CFString = ConstantString("smtp")
/// SOCKS.
nonisolated(unsafe) public let kSecAttrProtocolSOCKS: CFString = ConstantString("sox ")
/// IMAP.
nonisolated(unsafe) public let kSecAttrProtocolIMAP: CFString = ConstantString("imap")
/// LDAP.
nonisolated(unsafe) public let kSecAttrProtocolLDAP: CFString = ConstantString("ldap")
/// AppleTalk.
nonisolated(unsafe) public let kSecAttrProtocolAppleTalk: CFString = ConstantString("atlk")
/// AFP.
nonisolated(unsafe) public let kSecAttrProtocolAFP: CFString = ConstantString("afp ")
/// Telnet.
nonisolated(unsafe) public let kSecAttrProtocolTelnet: CFString = ConstantString("teln")
/// SSH.
nonisolated(unsafe) public let kSecAttrProtocolSSH: CFString = ConstantString("ssh ")
/// FTP over TLS.
nonisolated(unsafe) public let kSecAttrProtocolFTPS: CFString = ConstantString("ftps")
/// HTTPS.
nonisolated(unsafe) public let kSecAttrProtocolHTTPS: CFString = ConstantString("htps")
/// HTTP proxy.
nonisolated(unsafe) public let kSecAttrProtocolHTTPProxy: CFString = ConstantString("htpx")
/// HTTPS proxy.
nonisolated(unsafe) public let kSecAttrProtocolHTTPSProxy: CFString = ConstantString("htsx")
/// FTP proxy.
nonisolated(unsafe) public let kSecAttrProtocolFTPProxy: CFString = ConstantString("ftpx")
/// SMB.
nonisolated(unsafe) public let kSecAttrProtocolSMB: CFString = ConstantString("smb ")
/// RTSP.
nonisolated(unsafe) public let kSecAttrProtocolRTSP: CFString = ConstantString("rtsp")
/// RTSP proxy.
nonisolated(unsafe) public let kSecAttrProtocolRTSPProxy: CFString = ConstantString("rtsx")
/// DAAP.
nonisolated(unsafe) public let kSecAttrProtocolDAAP: CFString = ConstantString("daap")
/// EPPC.
nonisolated(unsafe) public let kSecAttrProtocolEPPC: CFString = ConstantString("eppc")
/// IPP.
nonisolated(unsafe) public let kSecAttrProtocolIPP: CFString = ConstantString("ipp ")
/// NNTP over TLS.
nonisolated(unsafe) public let kSecAttrProtocolNNTPS: CFString = ConstantString("ntps")
/// LDAP over TLS.
nonisolated(unsafe) public let kSecAttrProtocolLDAPS: CFString = ConstantString("ldps")
/// Telnet over TLS.
nonisolated(unsafe) public let kSecAttrProtocolTelnetS: CFString = ConstantString("tels")
/// IMAP over TLS.
nonisolated(unsafe) public let kSecAttrProtocolIMAPS: CFString = ConstantString("imps")
/// IRC over TLS.
nonisolated(unsafe) public let kSecAttrProtocolIRCS: CFString = ConstantString("ircs")
/// POP3 over TLS.
nonisolated(unsafe) public let kSecAttrProtocolPOP3S: CFString = ConstantString("pops")

// MARK: Authentication types

/// NTLM.
nonisolated(unsafe) public let kSecAttrAuthenticationTypeNTLM: CFString = ConstantString("ntlm")
/// MSN.
nonisolated(unsafe) public let kSecAttrAuthenticationTypeMSN: CFString = ConstantString("msna")
/// DPA.
nonisolated(unsafe) public let kSecAttrAuthenticationTypeDPA: CFString = ConstantString("dpaa")
/// RPA.
nonisolated(unsafe) public let kSecAttrAuthenticationTypeRPA: CFString = ConstantString("rpaa")
/// HTTP basic.
nonisolated(unsafe) public let kSecAttrAuthenticationTypeHTTPBasic: CFString = ConstantString("http")
/// HTTP digest.
nonisolated(unsafe) public let kSecAttrAuthenticationTypeHTTPDigest: CFString = ConstantString("httd")
/// HTML form.
nonisolated(unsafe) public let kSecAttrAuthenticationTypeHTMLForm: CFString = ConstantString("form")
/// The default scheme.
nonisolated(unsafe) public let kSecAttrAuthenticationTypeDefault: CFString = ConstantString("dflt")

// MARK: Search

/// How many matches to return: `kSecMatchLimitOne` (the default), `kSecMatchLimitAll` or a number.
nonisolated(unsafe) public let kSecMatchLimit: CFString = ConstantString(ItemKey.matchLimit)
/// One match.
nonisolated(unsafe) public let kSecMatchLimitOne: CFString = ConstantString(ItemKey.matchLimitOne)
/// Every match.
nonisolated(unsafe) public let kSecMatchLimitAll: CFString = ConstantString(ItemKey.matchLimitAll)
/// Compare strings without regard to case.
nonisolated(unsafe) public let kSecMatchCaseInsensitive: CFString = ConstantString(ItemKey.matchCaseInsensitive)
/// Match certificates by policy (not supported: `errSecParam`).
nonisolated(unsafe) public let kSecMatchPolicy: CFString = ConstantString("m_Policy")
/// Match within a list of items (not supported: `errSecParam`).
nonisolated(unsafe) public let kSecMatchItemList: CFString = ConstantString("m_ItemList")
/// Match certificates by issuer (not supported: `errSecParam`).
nonisolated(unsafe) public let kSecMatchIssuers: CFString = ConstantString("m_Issuers")
/// Match certificates valid on a date (not supported: `errSecParam`).
nonisolated(unsafe) public let kSecMatchValidOnDate: CFString = ConstantString("m_ValidOnDate")
/// Match only trusted certificates (not supported: `errSecParam`).
nonisolated(unsafe) public let kSecMatchTrustedOnly: CFString = ConstantString("m_TrustedOnly")

// MARK: Return types and values

/// Return the item's data.
nonisolated(unsafe) public let kSecReturnData: CFString = ConstantString(ItemKey.returnData)
/// Return the item's attributes.
nonisolated(unsafe) public let kSecReturnAttributes: CFString = ConstantString(ItemKey.returnAttributes)
/// Return a reference (`SecCertificate`, `SecKey`, `SecIdentity`).
nonisolated(unsafe) public let kSecReturnRef: CFString = ConstantString(ItemKey.returnReference)
/// Return a persistent reference.
nonisolated(unsafe) public let kSecReturnPersistentRef: CFString = ConstantString(ItemKey.returnPersistentReference)
/// The item's data.
nonisolated(unsafe) public let kSecValueData: CFString = ConstantString(ItemKey.valueData)
/// A reference to the item.
nonisolated(unsafe) public let kSecValueRef: CFString = ConstantString("v_Ref")
/// A persistent reference to the item.
nonisolated(unsafe) public let kSecValuePersistentRef: CFString = ConstantString(ItemKey.valuePersistentReference)
/// The item's persistent reference as an attribute (`"persistref"`): returned among `kSecReturnAttributes`
/// results, and accepted in a query with the same meaning as `kSecValuePersistentRef`.
nonisolated(unsafe) public let kSecAttrPersistentReference: CFString = ConstantString("persistref")

// MARK: Use

/// The `LAContext` to authenticate with.
nonisolated(unsafe) public let kSecUseAuthenticationContext: CFString = ConstantString(ItemKey.authenticationContext)
/// Whether the user may be asked to authenticate.
nonisolated(unsafe) public let kSecUseAuthenticationUI: CFString = ConstantString("u_AuthUI")
/// The user may be asked (the default).
nonisolated(unsafe) public let kSecUseAuthenticationUIAllow: CFString = ConstantString("u_AuthUIA")
/// Fail with `errSecInteractionNotAllowed` instead of asking.
nonisolated(unsafe) public let kSecUseAuthenticationUIFail: CFString = ConstantString("u_AuthUIF")
/// Skip items that would need an authentication (`SecItemCopyMatching` only).
nonisolated(unsafe) public let kSecUseAuthenticationUISkip: CFString = ConstantString("u_AuthUIS")
/// The reason shown when asking (deprecated by Apple for `LAContext.localizedReason`).
nonisolated(unsafe) public let kSecUseOperationPrompt: CFString = ConstantString(ItemKey.operationPrompt)
/// Do not ask (deprecated by Apple).
nonisolated(unsafe) public let kSecUseNoAuthenticationUI: CFString = ConstantString("u_NoAuthUI")
/// Use the data-protection keychain (always so here).
nonisolated(unsafe) public let kSecUseDataProtectionKeychain: CFString = ConstantString("nleg")
