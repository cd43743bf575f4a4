package preview

import (
	"net/http"
	"slices"
	"strings"
	"testing"
)

// previewerTests are full user agents as the fetchers send them (sources in
// agents.txt), each with the entry that must recognise it. Every entry of
// agents.txt needs at least one case here; TestDefaultList checks that.
var previewerTests = []struct {
	ua, want string
}{
	// Chat unfurlers.
	{"Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)", "agent:Slackbot"},
	{"Slackbot 1.0 (+https://api.slack.com/robots)", "agent:Slackbot"},
	{"Slack-ImgProxy (+https://api.slack.com/robots)", "agent:Slack-ImgProxy"},
	{"Slack-ImgProxy 149 (+https://api.slack.com/robots)", "agent:Slack-ImgProxy"},
	{"facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)", "agent:facebookexternalhit"},
	{"facebookexternalhit/1.1", "agent:facebookexternalhit"},
	{"facebookexternalhit/1.1;line-poker/1.0", "agent:facebookexternalhit"},                                                // LINE
	{"facebookexternalhit/1.1;kakaotalk-scrap/1.0; +https://devtalk.kakao.com/t/scrap/33984", "agent:facebookexternalhit"}, // KakaoTalk
	// Apple iMessage: a Safari user agent with Meta's and X's crawler names.
	{"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_11_1) AppleWebKit/601.2.4 (KHTML, like Gecko) Version/9.0.1 Safari/601.2.4 facebookexternalhit/1.1 Facebot Twitterbot/1.0", "agent:facebookexternalhit"},
	{"Facebot/1.0", "agent:Facebot"},
	{"TelegramBot (like TwitterBot)", "agent:TelegramBot"}, // not Twitterbot: list order
	{"Twitterbot/1.0", "agent:Twitterbot"},
	{"Twitterbot/0.1", "agent:Twitterbot"},
	{"Mozilla/5.0 (compatible; Discordbot/2.0; +https://discordapp.com)", "agent:Discordbot"},
	{"WhatsApp/2.23.20.0 A", "agent:WhatsApp"},
	{"WhatsApp/2.19.92 i", "agent:WhatsApp"},
	{"WhatsApp/2", "agent:WhatsApp"}, // Signal's link previews
	{"LinkedInBot/1.0 (compatible; Mozilla/5.0; Apache-HttpClient +http://www.linkedin.com)", "agent:LinkedInBot"},
	{"LinkedInBot/1.0 (compatible; Mozilla/5.0; Jakarta Commons-HttpClient/3.1 +http://www.linkedin.com)", "agent:LinkedInBot"},
	{"Mattermost-Bot/1.1", "agent:Mattermost-Bot"},
	{"Mozilla/5.0 (compatible; ZulipURLPreview/9.0; +https://chat.zulip.org)", "agent:ZulipURLPreview"},
	{"Synapse (bot; +https://github.com/matrix-org/synapse)", "agent:Synapse (bot"},
	{"http.rb/5.1.1 (Mastodon/4.2.0; +https://mastodon.social/)", "agent:Mastodon/"},
	{"http.rb/4.4.1 (Mastodon/3.5.3; +https://fosstodon.org/)", "agent:Mastodon/"},
	{"Mozilla/5.0 (compatible; Bluesky Cardyb/1.1; +mailto:support@bsky.app)", "agent:Bluesky Cardyb"},
	{"Viber/20.9.0.8 CFNetwork/1410.0.3 Darwin/22.6.0", "agent:Viber"},
	{"Viber", "agent:Viber"},
	{"Snap URL Preview Service; bot; snapchat; https://developers.snap.com/robots", "agent:Snap URL Preview Service"},
	{"Bitrix link preview", "agent:Bitrix link preview"},
	{"Valve/Steam HTTP Client 1.0 (SteamChatURLLookup)", "agent:SteamChatURLLookup"},

	// Microsoft: Teams, Outlook and Office.
	{"SkypeUriPreview Preview/0.5", "agent:SkypeUriPreview"},
	{"Mozilla/5.0 (Windows NT 6.1; WOW64) SkypeUriPreview Preview/0.5", "agent:SkypeUriPreview"},
	{"Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; MicrosoftPreview/2.0; +https://aka.ms/MicrosoftPreview) Chrome/124.0.0.0 Safari/537.36", "agent:MicrosoftPreview"},
	{"Mozilla/5.0 (Windows NT 6.1; WOW64) AppleWebKit/534+ (KHTML, like Gecko) BingPreview/1.0b", "agent:BingPreview"},
	{"Mozilla/5.0 (iPhone; CPU iPhone OS 7_0 like Mac OS X) AppleWebKit/537.51.1 (KHTML, like Gecko) Version/7.0 Mobile/11A465 Safari/9537.53 BingPreview/1.0b", "agent:BingPreview"},
	{"Microsoft Office Existence Discovery", "agent:Microsoft Office Existence Discovery"},
	{"Microsoft Office Protocol Discovery", "agent:Microsoft Office Protocol Discovery"},
	{"Mozilla/4.0 (compatible; ms-office; MSOffice 16)", "agent:ms-office"},
	// Outlook desktop's own fetches: matched on purpose (agents.txt says why).
	{"Mozilla/4.0 (compatible; MSIE 7.0; Windows NT 10.0; WOW64; Trident/7.0; .NET4.0C; .NET4.0E; .NET CLR 2.0.50727; .NET CLR 3.0.30729; .NET CLR 3.5.30729; Microsoft Outlook 16.0.4266; ms-office; MSOffice 16)", "agent:ms-office"},
	{"MSOffice 16", "agent:MSOffice"},
	{"Microsoft Office/16.0 (Windows NT 10.0; Microsoft Outlook 16.0.17928; Pro)", "agent:Microsoft Outlook"},

	// Google, Apple, Yahoo; search crawlers.
	{"Mozilla/5.0 (Windows NT 5.1; rv:11.0) Gecko Firefox/11.0 (via ggpht.com GoogleImageProxy)", "agent:GoogleImageProxy"},
	{"Mozilla/5.0 Google-PageRenderer Google (+https://developers.google.com/+/web/snippet/)", "agent:Google-PageRenderer"},
	{"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko; Google Web Preview) Chrome/27.0.1453 Safari/537.36", "agent:Google Web Preview"},
	{"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/41.0.2272.118 Safari/537.36 (compatible; Google-Read-Aloud; +https://developers.google.com/search/docs/crawling-indexing/overview-google-crawlers)", "agent:Google-Read-Aloud"},
	{"Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", "agent:Googlebot"},
	{"Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X Build/MMB29P) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.6367.201 Mobile Safari/537.36 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", "agent:Googlebot"},
	{"Googlebot-Image/1.0", "agent:Googlebot"},
	{"Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)", "agent:bingbot"},
	{"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_10_1) AppleWebKit/600.2.5 (KHTML, like Gecko) Version/8.0.2 Safari/600.2.5 (Applebot/0.1; +http://www.apple.com/go/applebot)", "agent:Applebot"},
	{"Mozilla/5.0 (compatible; Yahoo Link Preview; https://help.yahoo.com/kb/mail/yahoo-link-preview-SLN23615.html)", "agent:Yahoo Link Preview"},

	// Embed services and social sites.
	{"Iframely/1.3.1 (+https://iframely.com/docs/about)", "agent:Iframely"},
	{"Iframely/0.7.3 (+http://iframely.com/;)", "agent:Iframely"},
	{"Mozilla/5.0 (compatible; Embedly/0.2; +http://support.embed.ly/)", "agent:Embedly"},
	{"Mozilla/5.0 (compatible; redditbot/1.0; +http://www.reddit.com/feedback)", "agent:redditbot"},
	{"Mozilla/5.0 (compatible; Pinterestbot/1.0; +http://www.pinterest.com/bot.html)", "agent:Pinterestbot"},
	{"Pinterest/0.2 (+http://www.pinterest.com/bot.html)", "agent:pinterest.com/bot"},
	{"Mozilla/5.0 (compatible; vkShare; +http://vk.com/dev/Share)", "agent:vkShare"},

	// Case does not matter, on either side.
	{"SLACKBOT-LINKEXPANDING 1.0", "agent:Slackbot"},
	{"mozilla/5.0 (compatible; discordbot/2.0; +https://discordapp.com)", "agent:Discordbot"},
	{"microsoft office existence discovery", "agent:Microsoft Office Existence Discovery"},
}

// ordinaryTests are user agents of people and of download tools: none may
// ever get a preview instead of the file.
var ordinaryTests = []string{
	// Browsers.
	"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36",
	"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36",
	"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36",
	"Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Mobile Safari/537.36",
	"Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) CriOS/124.0.6367.88 Mobile/15E148 Safari/604.1",
	"Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:125.0) Gecko/20100101 Firefox/125.0",
	"Mozilla/5.0 (X11; Linux x86_64; rv:125.0) Gecko/20100101 Firefox/125.0",
	"Mozilla/5.0 (Macintosh; Intel Mac OS X 14.4; rv:125.0) Gecko/20100101 Firefox/125.0",
	"Mozilla/5.0 (Android 14; Mobile; rv:125.0) Gecko/125.0 Firefox/125.0",
	"Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) FxiOS/125.0 Mobile/15E148 Safari/605.1.15",
	"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4.1 Safari/605.1.15",
	"Mozilla/5.0 (iPhone; CPU iPhone OS 17_4_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4.1 Mobile/15E148 Safari/604.1",
	"Mozilla/5.0 (iPad; CPU OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1",
	"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36 Edg/124.0.2478.80",
	"Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Mobile Safari/537.36 EdgA/124.0.2478.64",
	"Mozilla/5.0 (Linux; Android 14; SAMSUNG SM-S918B) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/24.0 Chrome/117.0.0.0 Mobile Safari/537.36",
	"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/123.0.0.0 Safari/537.36 OPR/109.0.0.0",
	"Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Mobile Safari/537.36 OPR/81.1.4292.78446",
	"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 YaBrowser/24.4.0.0 Safari/537.36",

	// In-app browsers and desktop apps of the services listed in agents.txt:
	// a person tapped the link, and the app's name is the trap.
	"Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 [FBAN/FBIOS;FBAV/459.0.0.38.107;FBBV/591090596;FBDV/iPhone15,2;FBMD/iPhone;FBSN/iOS;FBSV/17.4;FBSS/3;FBID/phone;FBLC/en_US;FBOP/5]",
	"Mozilla/5.0 (Linux; Android 14; Pixel 8 Build/AP1A.240405.002; wv) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/124.0.6367.82 Mobile Safari/537.36 [FB_IAB/FB4A;FBAV/460.0.0.48.109;]",
	"Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 Instagram 300.0.0.18.110 (iPhone15,2; iOS 17_5; de_DE; de-DE; scale=3.00; 1179x2556)",
	"Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 [LinkedInApp]/9.30.2144",
	"Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 [Pinterest/iOS]",
	"Mozilla/5.0 (iPhone; CPU iPhone OS 15_7_2 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/16.5 Mobile/15E148 Safari/604.1 Snapchat/13.39.0.44 (like Safari/8618.3.11.10.5, panda)",
	"Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 Outlook-iOS/745.0.prod.iphone (3.51.0)",
	"Mozilla/5.0 (Linux; Android 13) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Mobile Safari/537.36 Outlook-Android/2.0",
	"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Slack/4.36.140 Chrome/120.0.6099.291 Electron/28.2.6 Safari/537.36 Sonic Slack_SSB/4.36.140",
	"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) discord/1.0.9163 Chrome/124.0.6367.243 Electron/30.2.0 Safari/537.36",

	// Download tools: plain clients are how SPEC §8 expects scripts to download.
	"curl/7.88.1",
	"curl/8.5.0",
	"Wget/1.21.3",
	"Wget/1.21.4",
	"aria2/1.36.0",
	"aria2/1.37.0",
	"Go-http-client/1.1",
	"Go-http-client/2.0",
	"python-requests/2.31.0",
	"python-requests/2.32.3",
	"python-httpx/0.27.0",
	"okhttp/4.12.0",
	"Microsoft BITS/7.8",
	"Mozilla/5.0 (Windows NT; Windows NT 10.0; en-US) WindowsPowerShell/5.1.22621.2506",
}

func TestCheckPreviewers(t *testing.T) {
	d := Default()
	for _, tt := range previewerTests {
		h := http.Header{"User-Agent": {tt.ua}}
		if got := d.Check(h); got != tt.want {
			t.Errorf("Check(%q) = %q, want %q", tt.ua, got, tt.want)
		}
	}
}

func TestCheckOrdinary(t *testing.T) {
	d := Default()
	for _, ua := range ordinaryTests {
		h := http.Header{"User-Agent": {ua}}
		if got := d.Check(h); got != "" {
			t.Errorf("Check(%q) = %q, want %q", ua, got, "")
		}
	}
}

const chrome = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36"

var headerTests = []struct {
	h    http.Header
	want string
}{
	// Nothing to go on: a download.
	{nil, ""},
	{http.Header{}, ""},
	{http.Header{"User-Agent": {""}}, ""},
	{http.Header{"User-Agent": {chrome}, "Accept": {"text/html"}}, ""},

	// Sec-Purpose (Fetch Standard): any value with the prefetch token.
	{http.Header{"Sec-Purpose": {"prefetch"}}, "prefetch"},
	{http.Header{"Sec-Purpose": {"prefetch"}, "User-Agent": {chrome}}, "prefetch"},
	{http.Header{"Sec-Purpose": {"prefetch;prerender"}}, "prefetch"},
	{http.Header{"Sec-Purpose": {"prefetch;prerender;preview"}}, "prefetch"},
	{http.Header{"Sec-Purpose": {"prefetch;anonymous-client-ip"}}, "prefetch"},
	{http.Header{"Sec-Purpose": {"Prefetch"}}, "prefetch"},
	{http.Header{"Sec-Purpose": {"PREFETCH; prerender"}}, "prefetch"},
	{http.Header{"Sec-Purpose": {" prefetch "}}, "prefetch"},
	{http.Header{"Sec-Purpose": {"prerender, prefetch"}}, "prefetch"},
	{http.Header{"Sec-Purpose": {"prerender;prefetch"}}, "prefetch"},
	{http.Header{"Sec-Purpose": {"other", "prefetch"}}, "prefetch"}, // second header line
	// Prerender alone is not prefetch: no browser sends it (Chromium sends
	// "prefetch;prerender"), and SPEC §8 asks for the prefetch token.
	{http.Header{"Sec-Purpose": {"prerender"}}, ""},
	{http.Header{"Sec-Purpose": {""}}, ""},
	{http.Header{"Sec-Purpose": {"no-prefetch"}}, ""},
	{http.Header{"Sec-Purpose": {"prefetchx"}}, ""},
	{http.Header{"Sec-Purpose": {"x=prefetch"}}, ""},
	{http.Header{"Sec-Purpose": {`"prefetch"`}}, ""}, // a string, not the token
	{http.Header{"Sec-Purpose": {"pre fetch"}}, ""},
	{http.Header{"Sec-Purpose": {"preſetch"}}, ""}, // U+017F folds to 's' in Unicode, not in ASCII

	// Legacy purpose headers.
	{http.Header{"Purpose": {"prefetch"}}, "prefetch"}, // Chrome's <link rel=prefetch>
	{http.Header{"Purpose": {"Prefetch"}}, "prefetch"},
	{http.Header{"Purpose": {"preview"}}, ""},
	{http.Header{"X-Moz": {"prefetch"}}, "prefetch"}, // Firefox before 115
	{http.Header{"X-Moz": {"PREFETCH"}}, "prefetch"},
	{http.Header{"X-Moz": {"microsummary"}}, ""},
	{http.Header{"X-Purpose": {"preview"}}, "prefetch"}, // Safari Top Sites, Chrome Instant
	{http.Header{"X-Purpose": {"Preview"}}, "prefetch"},
	{http.Header{"X-Purpose": {"prefetch"}}, ""},

	// Prefetch wins over an agent: the reason names what the request is for.
	{http.Header{"Sec-Purpose": {"prefetch"}, "User-Agent": {"Twitterbot/1.0"}}, "prefetch"},

	// Any User-Agent line may name a previewer.
	{http.Header{"User-Agent": {chrome, "Twitterbot/1.0"}}, "agent:Twitterbot"},
}

func TestCheckHeaders(t *testing.T) {
	d := Default()
	for _, tt := range headerTests {
		if got := d.Check(tt.h); got != tt.want {
			t.Errorf("Check(%q) = %q, want %q", tt.h, got, tt.want)
		}
	}
}

// TestCheckHeaderKeys shows Check reads headers as net/http stores them:
// parsed requests and Header.Set canonicalise the names.
func TestCheckHeaderKeys(t *testing.T) {
	h := http.Header{}
	h.Set("sec-purpose", "prefetch")
	if got := Default().Check(h); got != "prefetch" {
		t.Errorf("Check(%q) = %q, want %q", h, got, "prefetch")
	}
	h = http.Header{}
	h.Set("user-agent", "Slackbot 1.0")
	if got := Default().Check(h); got != "agent:Slackbot" {
		t.Errorf("Check(%q) = %q, want %q", h, got, "agent:Slackbot")
	}
}

func TestCheckLongUserAgent(t *testing.T) {
	// An entry at the very end of a long user agent is still found.
	ua := chrome + strings.Repeat(" x", 4096) + " Twitterbot/1.0"
	h := http.Header{"User-Agent": {ua}}
	if got := Default().Check(h); got != "agent:Twitterbot" {
		t.Errorf("Check(<%d-byte user agent ending in Twitterbot/1.0>) = %q, want %q", len(ua), got, "agent:Twitterbot")
	}
	h = http.Header{"User-Agent": {chrome + strings.Repeat(" x", 4096)}}
	if got := Default().Check(h); got != "" {
		t.Errorf("Check(<%d-byte browser user agent>) = %q, want %q", len(h.Get("User-Agent")), got, "")
	}
}

func TestCheckNilDetector(t *testing.T) {
	var d *Detector
	for _, tt := range []struct {
		h    http.Header
		want string
	}{
		{http.Header{"User-Agent": {"Twitterbot/1.0"}}, ""},
		{http.Header{"Sec-Purpose": {"prefetch"}}, "prefetch"},
	} {
		if got := d.Check(tt.h); got != tt.want {
			t.Errorf("(*Detector)(nil).Check(%q) = %q, want %q", tt.h, got, tt.want)
		}
	}
}

// TestCheckDoesNotAllocate holds Check to its promise for the requests it
// sees most: browsers, which scan the whole list, and previewers.
func TestCheckDoesNotAllocate(t *testing.T) {
	d := Default()
	for _, h := range []http.Header{
		{"User-Agent": {chrome}},
		{"User-Agent": {"Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)"}},
		{"User-Agent": {chrome}, "Sec-Purpose": {"prefetch;prerender"}},
	} {
		if n := testing.AllocsPerRun(100, func() { d.Check(h) }); n != 0 {
			t.Errorf("Check(%q) allocates %v times, want 0", h, n)
		}
	}
}

func TestNewReplacesList(t *testing.T) {
	d, err := New([]string{"ExampleBot", "  Acme Preview  "})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	for _, tt := range []struct {
		h    http.Header
		want string
	}{
		{http.Header{"User-Agent": {"ExampleBot/1.0"}}, "agent:ExampleBot"},
		{http.Header{"User-Agent": {"Mozilla/5.0 (compatible; acme preview)"}}, "agent:Acme Preview"},
		{http.Header{"User-Agent": {"Slackbot 1.0 (+https://api.slack.com/robots)"}}, ""}, // the built-in list is gone
		{http.Header{"User-Agent": {chrome}}, ""},
		{http.Header{"Sec-Purpose": {"prefetch"}}, "prefetch"},
	} {
		if got := d.Check(tt.h); got != tt.want {
			t.Errorf("Check(%q) = %q, want %q", tt.h, got, tt.want)
		}
	}
}

func TestNewEmptyList(t *testing.T) {
	// GATEWAY_PREVIEW_AGENTS set to an empty list: no agent is a previewer,
	// prefetch still is.
	for _, list := range [][]string{nil, {}, ParseList(""), ParseList(" , ,")} {
		d, err := New(list)
		if err != nil {
			t.Fatalf("New(%q): %v", list, err)
		}
		for _, tt := range []struct {
			h    http.Header
			want string
		}{
			{http.Header{"User-Agent": {"Twitterbot/1.0"}}, ""},
			{http.Header{"User-Agent": {"Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)"}}, ""},
			{http.Header{"Sec-Purpose": {"prefetch"}}, "prefetch"},
			{http.Header{"X-Moz": {"prefetch"}}, "prefetch"},
		} {
			if got := d.Check(tt.h); got != tt.want {
				t.Errorf("New(%q).Check(%q) = %q, want %q", list, tt.h, got, tt.want)
			}
		}
	}
}

func TestNewErrors(t *testing.T) {
	for _, list := range [][]string{
		{""},
		{"   "},
		{"Slackbot", ""},
		{"Bot\x00"},
		{"Bot\nX"},
		{"Bot\tX"},
		{"Prévisualisation"}, // matching folds ASCII only
		// Entries found in ordinary browsers and download tools.
		{"Mozilla"},
		{"mozilla/5.0"},
		{"AppleWebKit"},
		{"Safari"},
		{"Chrome"},
		{"Mobile"},
		{"Windows NT"},
		{"Gecko"},
		{"Firefox"},
		{"Edg/"},
		{"curl"},
		{"Wget"},
		{"aria2"},
		{"Go-http-client"},
		{"python-requests"},
		{"a"},
		{"zq"}, // shorter than three characters
		{"/"},
		{"Slackbot", "Mozilla"},
	} {
		if d, err := New(list); err == nil {
			t.Errorf("New(%q) = %v, nil; want an error", list, d)
		}
	}
}

func TestParseList(t *testing.T) {
	for _, tt := range []struct {
		s    string
		want []string
	}{
		{"", nil},
		{" ", nil},
		{",", nil},
		{" , ,, ", nil},
		{"Slackbot", []string{"Slackbot"}},
		{"Slackbot,Twitterbot", []string{"Slackbot", "Twitterbot"}},
		{" Slackbot , Twitterbot ", []string{"Slackbot", "Twitterbot"}},
		{"Slackbot,,Twitterbot,", []string{"Slackbot", "Twitterbot"}},
		{"Microsoft Office Existence Discovery, Yahoo Link Preview", []string{"Microsoft Office Existence Discovery", "Yahoo Link Preview"}},
		{"\tExampleBot\t", []string{"ExampleBot"}},
	} {
		if got := ParseList(tt.s); !slices.Equal(got, tt.want) {
			t.Errorf("ParseList(%q) = %q, want %q", tt.s, got, tt.want)
		}
	}
}

// TestDefaultList checks agents.txt: it is valid, every entry has the
// comment that says where its user agent comes from, no entry is listed
// twice, and every entry has a real user agent in previewerTests.
func TestDefaultList(t *testing.T) {
	entries := parseAgentsFile(agentsFile)
	if len(entries) == 0 {
		t.Fatal("agents.txt has no entries")
	}
	if _, err := New(entries); err != nil {
		t.Fatalf("New(agents.txt): %v", err)
	}

	prev := ""
	for line := range strings.Lines(agentsFile) {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "#") && !strings.HasPrefix(prev, "#") {
			t.Errorf("agents.txt: entry %q has no comment above it saying where its user agent comes from", line)
		}
		prev = line
	}

	seen := map[string]bool{}
	for _, e := range entries {
		if seen[strings.ToLower(e)] {
			t.Errorf("agents.txt: %q is listed twice", e)
		}
		seen[strings.ToLower(e)] = true
	}

	for _, e := range entries {
		if !slices.ContainsFunc(previewerTests, func(tt struct{ ua, want string }) bool {
			return tt.want == reasonAgentPrefix+e
		}) {
			t.Errorf("agents.txt: %q has no real user agent in previewerTests", e)
		}
	}
}

// TestOrdinaryClientsAreTested keeps New's own list of ordinary clients
// within ordinaryTests, so that the two cannot drift apart.
func TestOrdinaryClientsAreTested(t *testing.T) {
	for _, ua := range ordinaryClients {
		if !slices.Contains(ordinaryTests, ua) {
			t.Errorf("ordinaryClients has %q, which ordinaryTests lacks", ua)
		}
	}
}

func BenchmarkCheck(b *testing.B) {
	d := Default()
	for _, bb := range []struct {
		name string
		h    http.Header
	}{
		// A browser is the common case and the slowest: the whole list is
		// scanned and nothing matches.
		{"Browser", http.Header{
			"User-Agent":      {chrome},
			"Accept":          {"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"},
			"Accept-Language": {"en-US,en;q=0.9"},
		}},
		{"Curl", http.Header{"User-Agent": {"curl/8.5.0"}}},
		{"FirstAgent", http.Header{"User-Agent": {"Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)"}}},
		{"LastAgent", http.Header{"User-Agent": {"Valve/Steam HTTP Client 1.0 (SteamChatURLLookup)"}}},
		{"Prefetch", http.Header{"User-Agent": {chrome}, "Sec-Purpose": {"prefetch;prerender"}}},
	} {
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				d.Check(bb.h)
			}
		})
	}
}
