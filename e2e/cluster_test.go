package e2e

import "testing"

// TestCluster runs the checks that share one deployment: three gateway
// processes on one MariaDB database and one versioned versitygw bucket,
// behind a round-robin balancer. Every check makes its own links.
func TestCluster(t *testing.T) {
	t.Parallel()
	c := MustStartCluster(t, ClusterOptions{Processes: 3})
	admin := c.Admin()
	small := admin.MustUpload(t, "cluster/small.bin", 256<<10)
	medium := admin.MustUpload(t, "cluster/report.bin", 5<<20)
	large := admin.MustUpload(t, "cluster/large.bin", 8<<20)

	// The race runs first and alone, so that nothing but its own 50
	// requests competes for the claims.
	t.Run("ClaimRace", func(t *testing.T) {
		for _, tc := range raceCases {
			t.Run(tc.name, func(t *testing.T) {
				checkClaimRace(t, c.Gateways, small, tc.downloads, raceTrials)
			})
		}
	})

	t.Run("Links", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			fn   func(*testing.T)
		}{
			{"HeadAndRangeNeverConsume", func(t *testing.T) { testHeadAndRangeNeverConsume(t, c, small) }},
			{"UnavailableLinksAreAGeneric404", func(t *testing.T) { testUnavailableLinksAre404(t, c, small) }},
			{"CurlAndWgetSaveByteExactFiles", func(t *testing.T) { testToolsDownload(t, c, medium) }},
			{"ALinkServesTheVersionItPinned", func(t *testing.T) { testPinnedVersion(t, c) }},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				tc.fn(t)
			})
		}
	})

	t.Run("Sessions", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			fn   func(*testing.T)
		}{
			{"Aria2cWithSixteenConnectionsCompletesUnderACapOfFour", func(t *testing.T) { testAria2cSplitsASession(t, c, large) }},
			{"ClientsAtTheCapAreNeverRefused", func(t *testing.T) { testClientsAtTheCapAreNeverRefused(t, c, large) }},
			{"CurlResumesAKilledDownload", func(t *testing.T) { testResumeAfterKill(t, c, large, "curl") }},
			{"WgetResumesAKilledDownload", func(t *testing.T) { testResumeAfterKill(t, c, large, "wget") }},
			{"ASessionLinkRedirectsToANewSession", func(t *testing.T) { testSessionLinkRedirects(t, c, medium) }},
			{"TheConcurrencyCapHoldsAcrossProcesses", func(t *testing.T) { testConcurrencyCapAcrossProcesses(t, c, large) }},
			{"TheByteBudgetHoldsAcrossProcesses", func(t *testing.T) { testBudgetHoldsAcrossProcesses(t, c, large) }},
			{"RevokingEndsSessionsAtOnce", func(t *testing.T) { testRevokeEndsSessions(t, c, small) }},
			{"OneIdempotencyKeyMintsOneSession", func(t *testing.T) { testIdempotentMint(t, c, small) }},
			{"RangesMultipartAndUnsatisfiable", func(t *testing.T) { testSessionRanges(t, c, small) }},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				tc.fn(t)
			})
		}
	})

	t.Run("People", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			fn   func(*testing.T)
		}{
			{"ResumingALinkURLFailsLoudlyAndKeepsThePartialFile", func(t *testing.T) { testResumingALinkFailsLoudly(t, c, large) }},
			{"Aria2cOnAStreamLinkCompletesWithOneClaim", func(t *testing.T) { testAria2cOnAStreamLink(t, c, medium) }},
			{"NamedURLsSaveUnderTheRealName", func(t *testing.T) { testNamedURLsSaveUnderTheRealName(t, c, small) }},
			{"PreviewersClaimNothing", func(t *testing.T) { testPreviewersClaimNothing(t, c, small) }},
			{"TwentyPostsOnAOneDownloadConfirmLinkGetOneFile", func(t *testing.T) { testConfirmLinkPostsRace(t, c, small) }},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				tc.fn(t)
			})
		}
	})

	t.Run("NoRawTokenReachesTheLogs", func(t *testing.T) {
		checkNoTokenInLogs(t, c.Gateways...)
	})
}
