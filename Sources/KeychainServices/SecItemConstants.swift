// Every kSec… constant with the literal string Apple's Security framework uses (SecItemConstants.c), so
// dictionaries built here and on Apple platforms hold the same keys and values.

// MARK: Classes

/// The key of an item's class.
nonisolated(unsafe) public let kSecClass: CFString = "class"
/// Generic password items.
nonisolated(unsafe) public let kSecClassGenericPassword: CFString = "genp"
/// Internet password items.
nonisolated(unsafe) public let kSecClassInternetPassword: CFString = "inet"
/// Certificate items.
nonisolated(unsafe) public let kSecClassCertificate: CFString = "cert"
/// Cryptographic key items.
nonisolated(unsafe) public let kSecClassKey: CFString = "keys"
/// Identity items: a certificate with its private key.
nonisolated(unsafe) public let kSecClassIdentity: CFString = "idnt"

// MARK: Attributes

/// When the item's data can be read (a `kSecAttrAccessible…` value).
nonisolated(unsafe) public let kSecAttrAccessible: CFString = "pdmn"
/// The item's `SecAccessControl`.
nonisolated(unsafe) public let kSecAttrAccessControl: CFString = "accc"
/// The item's trusted-application list, a `SecAccess` (macOS; exclusive with `kSecAttrAccessControl`).
nonisolated(unsafe) public let kSecAttrAccess: CFString = "acls"
/// The item's keychain access group.
nonisolated(unsafe) public let kSecAttrAccessGroup: CFString = "agrp"
/// Whether the item is synchronizable (`true`, `false`, or `kSecAttrSynchronizableAny` in queries).
nonisolated(unsafe) public let kSecAttrSynchronizable: CFString = "sync"
/// Matches synchronizable and non-synchronizable items.
nonisolated(unsafe) public let kSecAttrSynchronizableAny: CFString = "syna"
/// A view hint for synchronization.
nonisolated(unsafe) public let kSecAttrSyncViewHint: CFString = "vwht"
/// When the item was created (read-only).
nonisolated(unsafe) public let kSecAttrCreationDate: CFString = "cdat"
/// When the item was last changed (read-only).
nonisolated(unsafe) public let kSecAttrModificationDate: CFString = "mdat"
/// A user-visible description.
nonisolated(unsafe) public let kSecAttrDescription: CFString = "desc"
/// A user-editable comment.
nonisolated(unsafe) public let kSecAttrComment: CFString = "icmt"
/// The creator code (a number).
nonisolated(unsafe) public let kSecAttrCreator: CFString = "crtr"
/// The item type code (a number) for passwords; the key type for keys.
nonisolated(unsafe) public let kSecAttrType: CFString = "type"
/// A user-visible label.
nonisolated(unsafe) public let kSecAttrLabel: CFString = "labl"
/// Whether the item is hidden.
nonisolated(unsafe) public let kSecAttrIsInvisible: CFString = "invi"
/// Whether the item marks a password the user declined to save.
nonisolated(unsafe) public let kSecAttrIsNegative: CFString = "nega"
/// The account name.
nonisolated(unsafe) public let kSecAttrAccount: CFString = "acct"
/// The service name of a generic password.
nonisolated(unsafe) public let kSecAttrService: CFString = "svce"
/// Application data of a generic password.
nonisolated(unsafe) public let kSecAttrGeneric: CFString = "gena"
/// The security domain of an internet password.
nonisolated(unsafe) public let kSecAttrSecurityDomain: CFString = "sdmn"
/// The server of an internet password.
nonisolated(unsafe) public let kSecAttrServer: CFString = "srvr"
/// The protocol of an internet password (a `kSecAttrProtocol…` value).
nonisolated(unsafe) public let kSecAttrProtocol: CFString = "ptcl"
/// The authentication scheme of an internet password (a `kSecAttrAuthenticationType…` value).
nonisolated(unsafe) public let kSecAttrAuthenticationType: CFString = "atyp"
/// The port of an internet password (a number).
nonisolated(unsafe) public let kSecAttrPort: CFString = "port"
/// The path of an internet password.
nonisolated(unsafe) public let kSecAttrPath: CFString = "path"
/// A certificate's subject (DER).
nonisolated(unsafe) public let kSecAttrSubject: CFString = "subj"
/// A certificate's issuer (DER).
nonisolated(unsafe) public let kSecAttrIssuer: CFString = "issr"
/// A certificate's serial number.
nonisolated(unsafe) public let kSecAttrSerialNumber: CFString = "slnr"
/// A certificate's subject key identifier.
nonisolated(unsafe) public let kSecAttrSubjectKeyID: CFString = "skid"
/// A certificate's public-key hash.
nonisolated(unsafe) public let kSecAttrPublicKeyHash: CFString = "pkhh"
/// A certificate's type (a number).
nonisolated(unsafe) public let kSecAttrCertificateType: CFString = "ctyp"
/// A certificate's encoding (a number).
nonisolated(unsafe) public let kSecAttrCertificateEncoding: CFString = "cenc"
/// A key's class (`kSecAttrKeyClassPublic`, `…Private`, `…Symmetric`).
nonisolated(unsafe) public let kSecAttrKeyClass: CFString = "kcls"
/// A key's application label (for EC keys: SHA-1 of the public key).
nonisolated(unsafe) public let kSecAttrApplicationLabel: CFString = "klbl"
/// Whether a key is stored permanently.
nonisolated(unsafe) public let kSecAttrIsPermanent: CFString = "perm"
/// Whether a key is sensitive (macOS).
nonisolated(unsafe) public let kSecAttrIsSensitive: CFString = "sens"
/// Whether a key is extractable (macOS).
nonisolated(unsafe) public let kSecAttrIsExtractable: CFString = "extr"
/// A key's application tag (data).
nonisolated(unsafe) public let kSecAttrApplicationTag: CFString = "atag"
/// A key's algorithm (a `kSecAttrKeyType…` value).
nonisolated(unsafe) public let kSecAttrKeyType: CFString = "type"
/// A key's size in bits.
nonisolated(unsafe) public let kSecAttrKeySizeInBits: CFString = "bsiz"
/// A key's effective size in bits.
nonisolated(unsafe) public let kSecAttrEffectiveKeySize: CFString = "esiz"
/// Whether a key can encrypt.
nonisolated(unsafe) public let kSecAttrCanEncrypt: CFString = "encr"
/// Whether a key can decrypt.
nonisolated(unsafe) public let kSecAttrCanDecrypt: CFString = "decr"
/// Whether a key can derive other keys.
nonisolated(unsafe) public let kSecAttrCanDerive: CFString = "drve"
/// Whether a key can sign.
nonisolated(unsafe) public let kSecAttrCanSign: CFString = "sign"
/// Whether a key can verify.
nonisolated(unsafe) public let kSecAttrCanVerify: CFString = "vrfy"
/// Whether a key can wrap other keys.
nonisolated(unsafe) public let kSecAttrCanWrap: CFString = "wrap"
/// Whether a key can unwrap other keys.
nonisolated(unsafe) public let kSecAttrCanUnwrap: CFString = "unwp"
/// The token holding a key.
nonisolated(unsafe) public let kSecAttrTokenID: CFString = "tkid"
/// The Secure Enclave token (here: the software enclave).
nonisolated(unsafe) public let kSecAttrTokenIDSecureEnclave: CFString = "com.apple.setoken"
/// The access group of token items.
nonisolated(unsafe) public let kSecAttrAccessGroupToken: CFString = "com.apple.token"

// MARK: Accessibility

/// Readable only while the device is unlocked; only if a passcode is set; never leaves the device.
nonisolated(unsafe) public let kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly: CFString = "akpu"
/// Readable only while unlocked (the default).
nonisolated(unsafe) public let kSecAttrAccessibleWhenUnlocked: CFString = "ak"
/// Readable only while unlocked; never leaves the device.
nonisolated(unsafe) public let kSecAttrAccessibleWhenUnlockedThisDeviceOnly: CFString = "aku"
/// Readable after the first unlock since boot.
nonisolated(unsafe) public let kSecAttrAccessibleAfterFirstUnlock: CFString = "ck"
/// Readable after the first unlock since boot; never leaves the device.
nonisolated(unsafe) public let kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly: CFString = "cku"
/// Always readable (deprecated by Apple).
nonisolated(unsafe) public let kSecAttrAccessibleAlways: CFString = "dk"
/// Always readable; never leaves the device (deprecated by Apple).
nonisolated(unsafe) public let kSecAttrAccessibleAlwaysThisDeviceOnly: CFString = "dku"

// MARK: Key classes and types

/// A public key.
nonisolated(unsafe) public let kSecAttrKeyClassPublic: CFString = "0"
/// A private key.
nonisolated(unsafe) public let kSecAttrKeyClassPrivate: CFString = "1"
/// A symmetric key.
nonisolated(unsafe) public let kSecAttrKeyClassSymmetric: CFString = "2"
/// RSA.
nonisolated(unsafe) public let kSecAttrKeyTypeRSA: CFString = "42"
/// Elliptic curve (same value as `kSecAttrKeyTypeECSECPrimeRandom`).
nonisolated(unsafe) public let kSecAttrKeyTypeEC: CFString = "73"
/// Elliptic curve over a prime field (P-256 here).
nonisolated(unsafe) public let kSecAttrKeyTypeECSECPrimeRandom: CFString = "73"
/// Attributes of the private key, in `SecKeyCreateRandomKey`'s parameters.
nonisolated(unsafe) public let kSecPrivateKeyAttrs: CFString = "private"
/// Attributes of the public key, in `SecKeyCreateRandomKey`'s parameters.
nonisolated(unsafe) public let kSecPublicKeyAttrs: CFString = "public"

// MARK: Internet protocols

/// FTP.
nonisolated(unsafe) public let kSecAttrProtocolFTP: CFString = "ftp "
/// FTP account.
nonisolated(unsafe) public let kSecAttrProtocolFTPAccount: CFString = "ftpa"
/// HTTP.
nonisolated(unsafe) public let kSecAttrProtocolHTTP: CFString = "http"
/// IRC.
nonisolated(unsafe) public let kSecAttrProtocolIRC: CFString = "irc "
/// NNTP.
nonisolated(unsafe) public let kSecAttrProtocolNNTP: CFString = "nntp"
/// POP3.
nonisolated(unsafe) public let kSecAttrProtocolPOP3: CFString = "pop3"
/// SMTP.
nonisolated(unsafe) public let kSecAttrProtocolSMTP: CFString = "smtp"
/// SOCKS.
nonisolated(unsafe) public let kSecAttrProtocolSOCKS: CFString = "sox "
/// IMAP.
nonisolated(unsafe) public let kSecAttrProtocolIMAP: CFString = "imap"
/// LDAP.
nonisolated(unsafe) public let kSecAttrProtocolLDAP: CFString = "ldap"
/// AppleTalk.
nonisolated(unsafe) public let kSecAttrProtocolAppleTalk: CFString = "atlk"
/// AFP.
nonisolated(unsafe) public let kSecAttrProtocolAFP: CFString = "afp "
/// Telnet.
nonisolated(unsafe) public let kSecAttrProtocolTelnet: CFString = "teln"
/// SSH.
nonisolated(unsafe) public let kSecAttrProtocolSSH: CFString = "ssh "
/// FTP over TLS.
nonisolated(unsafe) public let kSecAttrProtocolFTPS: CFString = "ftps"
/// HTTPS.
nonisolated(unsafe) public let kSecAttrProtocolHTTPS: CFString = "htps"
/// HTTP proxy.
nonisolated(unsafe) public let kSecAttrProtocolHTTPProxy: CFString = "htpx"
/// HTTPS proxy.
nonisolated(unsafe) public let kSecAttrProtocolHTTPSProxy: CFString = "htsx"
/// FTP proxy.
nonisolated(unsafe) public let kSecAttrProtocolFTPProxy: CFString = "ftpx"
/// SMB.
nonisolated(unsafe) public let kSecAttrProtocolSMB: CFString = "smb "
/// RTSP.
nonisolated(unsafe) public let kSecAttrProtocolRTSP: CFString = "rtsp"
/// RTSP proxy.
nonisolated(unsafe) public let kSecAttrProtocolRTSPProxy: CFString = "rtsx"
/// DAAP.
nonisolated(unsafe) public let kSecAttrProtocolDAAP: CFString = "daap"
/// EPPC.
nonisolated(unsafe) public let kSecAttrProtocolEPPC: CFString = "eppc"
/// IPP.
nonisolated(unsafe) public let kSecAttrProtocolIPP: CFString = "ipp "
/// NNTP over TLS.
nonisolated(unsafe) public let kSecAttrProtocolNNTPS: CFString = "ntps"
/// LDAP over TLS.
nonisolated(unsafe) public let kSecAttrProtocolLDAPS: CFString = "ldps"
/// Telnet over TLS.
nonisolated(unsafe) public let kSecAttrProtocolTelnetS: CFString = "tels"
/// IMAP over TLS.
nonisolated(unsafe) public let kSecAttrProtocolIMAPS: CFString = "imps"
/// IRC over TLS.
nonisolated(unsafe) public let kSecAttrProtocolIRCS: CFString = "ircs"
/// POP3 over TLS.
nonisolated(unsafe) public let kSecAttrProtocolPOP3S: CFString = "pops"

// MARK: Authentication types

/// NTLM.
nonisolated(unsafe) public let kSecAttrAuthenticationTypeNTLM: CFString = "ntlm"
/// MSN.
nonisolated(unsafe) public let kSecAttrAuthenticationTypeMSN: CFString = "msna"
/// DPA.
nonisolated(unsafe) public let kSecAttrAuthenticationTypeDPA: CFString = "dpaa"
/// RPA.
nonisolated(unsafe) public let kSecAttrAuthenticationTypeRPA: CFString = "rpaa"
/// HTTP basic.
nonisolated(unsafe) public let kSecAttrAuthenticationTypeHTTPBasic: CFString = "http"
/// HTTP digest.
nonisolated(unsafe) public let kSecAttrAuthenticationTypeHTTPDigest: CFString = "httd"
/// HTML form.
nonisolated(unsafe) public let kSecAttrAuthenticationTypeHTMLForm: CFString = "form"
/// The default scheme.
nonisolated(unsafe) public let kSecAttrAuthenticationTypeDefault: CFString = "dflt"

// MARK: Search

/// How many matches to return: `kSecMatchLimitOne` (the default), `kSecMatchLimitAll` or a number.
nonisolated(unsafe) public let kSecMatchLimit: CFString = "m_Limit"
/// One match.
nonisolated(unsafe) public let kSecMatchLimitOne: CFString = "m_LimitOne"
/// Every match.
nonisolated(unsafe) public let kSecMatchLimitAll: CFString = "m_LimitAll"
/// Compare strings without regard to case.
nonisolated(unsafe) public let kSecMatchCaseInsensitive: CFString = "m_CaseInsensitive"
/// Match certificates by policy (not supported: `errSecParam`).
nonisolated(unsafe) public let kSecMatchPolicy: CFString = "m_Policy"
/// Match within a list of items (not supported: `errSecParam`).
nonisolated(unsafe) public let kSecMatchItemList: CFString = "m_ItemList"
/// Match certificates by issuer (not supported: `errSecParam`).
nonisolated(unsafe) public let kSecMatchIssuers: CFString = "m_Issuers"
/// Match certificates valid on a date (not supported: `errSecParam`).
nonisolated(unsafe) public let kSecMatchValidOnDate: CFString = "m_ValidOnDate"
/// Match only trusted certificates (not supported: `errSecParam`).
nonisolated(unsafe) public let kSecMatchTrustedOnly: CFString = "m_TrustedOnly"

// MARK: Return types and values

/// Return the item's data.
nonisolated(unsafe) public let kSecReturnData: CFString = "r_Data"
/// Return the item's attributes.
nonisolated(unsafe) public let kSecReturnAttributes: CFString = "r_Attributes"
/// Return a reference (`SecCertificate`, `SecKey`, `SecIdentity`).
nonisolated(unsafe) public let kSecReturnRef: CFString = "r_Ref"
/// Return a persistent reference.
nonisolated(unsafe) public let kSecReturnPersistentRef: CFString = "r_PersistentRef"
/// The item's data.
nonisolated(unsafe) public let kSecValueData: CFString = "v_Data"
/// A reference to the item.
nonisolated(unsafe) public let kSecValueRef: CFString = "v_Ref"
/// A persistent reference to the item.
nonisolated(unsafe) public let kSecValuePersistentRef: CFString = "v_PersistentRef"
/// The item's persistent reference as an attribute (`"persistref"`): returned among `kSecReturnAttributes`
/// results, and accepted in a query with the same meaning as `kSecValuePersistentRef`.
nonisolated(unsafe) public let kSecAttrPersistentReference: CFString = "persistref"

// MARK: Use

/// The `LAContext` to authenticate with.
nonisolated(unsafe) public let kSecUseAuthenticationContext: CFString = "u_AuthCtx"
/// Whether the user may be asked to authenticate.
nonisolated(unsafe) public let kSecUseAuthenticationUI: CFString = "u_AuthUI"
/// The user may be asked (the default).
nonisolated(unsafe) public let kSecUseAuthenticationUIAllow: CFString = "u_AuthUIA"
/// Fail with `errSecInteractionNotAllowed` instead of asking.
nonisolated(unsafe) public let kSecUseAuthenticationUIFail: CFString = "u_AuthUIF"
/// Skip items that would need an authentication (`SecItemCopyMatching` only).
nonisolated(unsafe) public let kSecUseAuthenticationUISkip: CFString = "u_AuthUIS"
/// The reason shown when asking (deprecated by Apple for `LAContext.localizedReason`).
nonisolated(unsafe) public let kSecUseOperationPrompt: CFString = "u_OpPrompt"
/// Do not ask (deprecated by Apple).
nonisolated(unsafe) public let kSecUseNoAuthenticationUI: CFString = "u_NoAuthUI"
/// Use the data-protection keychain (always so here).
nonisolated(unsafe) public let kSecUseDataProtectionKeychain: CFString = "nleg"
