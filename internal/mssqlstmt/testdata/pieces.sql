-- name: int/whole
-- @p1 = bigint 10000
SELECT [id], CAST([amount] * @p1 AS bigint) AS [amount], CAST([note] AS varbinary(max)) AS [note] FROM [dbo].[orders];

-- name: int/first
-- @p1 = bigint 10000
-- @p2 = bigint 100
SELECT [id], CAST([amount] * @p1 AS bigint) AS [amount], CAST([note] AS varbinary(max)) AS [note] FROM [dbo].[orders] WHERE [id] < CAST(@p2 AS int);

-- name: int/middle
-- @p1 = bigint 10000
-- @p2 = bigint 100
-- @p3 = bigint 200
SELECT [id], CAST([amount] * @p1 AS bigint) AS [amount], CAST([note] AS varbinary(max)) AS [note] FROM [dbo].[orders] WHERE [id] >= CAST(@p2 AS int) AND [id] < CAST(@p3 AS int);

-- name: int/last
-- @p1 = bigint 10000
-- @p2 = bigint 200
SELECT [id], CAST([amount] * @p1 AS bigint) AS [amount], CAST([note] AS varbinary(max)) AS [note] FROM [dbo].[orders] WHERE [id] >= CAST(@p2 AS int);

-- name: composite/only
SELECT [company], [id], [qty] FROM [dbo].[lines];

-- name: composite/first
-- @p1 = bigint 3
-- @p2 = bigint 500
SELECT [company], [id], [qty] FROM [dbo].[lines] WHERE [company] < CAST(@p1 AS int)
UNION ALL
SELECT [company], [id], [qty] FROM [dbo].[lines] WHERE [company] = CAST(@p1 AS int) AND [id] < CAST(@p2 AS bigint);

-- name: composite/middle
-- @p1 = bigint 3
-- @p2 = bigint 500
-- @p3 = bigint 7
-- @p4 = bigint 20
SELECT [company], [id], [qty] FROM [dbo].[lines] WHERE [company] = CAST(@p1 AS int) AND [id] >= CAST(@p2 AS bigint) AND (([company] < CAST(@p3 AS int)) OR ([company] = CAST(@p3 AS int) AND [id] < CAST(@p4 AS bigint)))
UNION ALL
SELECT [company], [id], [qty] FROM [dbo].[lines] WHERE [company] > CAST(@p1 AS int) AND [company] < CAST(@p3 AS int)
UNION ALL
SELECT [company], [id], [qty] FROM [dbo].[lines] WHERE [company] = CAST(@p3 AS int) AND [id] < CAST(@p4 AS bigint) AND [company] > CAST(@p1 AS int);

-- name: composite/middle_one_company
-- @p1 = bigint 3
-- @p2 = bigint 500
-- @p3 = bigint 900
SELECT [company], [id], [qty] FROM [dbo].[lines] WHERE [company] = CAST(@p1 AS int) AND [id] >= CAST(@p2 AS bigint) AND [id] < CAST(@p3 AS bigint);

-- name: composite/last
-- @p1 = bigint 7
-- @p2 = bigint 20
SELECT [company], [id], [qty] FROM [dbo].[lines] WHERE [company] = CAST(@p1 AS int) AND [id] >= CAST(@p2 AS bigint)
UNION ALL
SELECT [company], [id], [qty] FROM [dbo].[lines] WHERE [company] > CAST(@p1 AS int);

-- name: composite_clustered/whole
SELECT [company], [id], [qty] FROM [dbo].[lines]
ORDER BY [company], [id];

-- name: composite_clustered/middle
-- @p1 = bigint 3
-- @p2 = bigint 500
-- @p3 = bigint 7
-- @p4 = bigint 20
SELECT [company], [id], [qty] FROM [dbo].[lines] WHERE [company] = CAST(@p1 AS int) AND [id] >= CAST(@p2 AS bigint) AND (([company] < CAST(@p3 AS int)) OR ([company] = CAST(@p3 AS int) AND [id] < CAST(@p4 AS bigint)))
UNION ALL
SELECT [company], [id], [qty] FROM [dbo].[lines] WHERE [company] > CAST(@p1 AS int) AND [company] < CAST(@p3 AS int)
UNION ALL
SELECT [company], [id], [qty] FROM [dbo].[lines] WHERE [company] = CAST(@p3 AS int) AND [id] < CAST(@p4 AS bigint) AND [company] > CAST(@p1 AS int)
ORDER BY [company], [id];

-- name: varchar_greek/first
-- @p1 = nvarchar N'Δέλτα'
SELECT CAST([name] AS nvarchar(20)) AS [name], [v] FROM [dbo].[snap_greek] WHERE [name] < CAST(@p1 COLLATE Greek_CI_AS AS varchar(20));

-- name: varchar_greek/middle
-- @p1 = nvarchar N'Δέλτα'
-- @p2 = nvarchar N'Λάμδα'
SELECT CAST([name] AS nvarchar(20)) AS [name], [v] FROM [dbo].[snap_greek] WHERE [name] >= CAST(@p1 COLLATE Greek_CI_AS AS varchar(20)) AND [name] < CAST(@p2 COLLATE Greek_CI_AS AS varchar(20));

-- name: varchar_greek/last
-- @p1 = nvarchar N'Λάμδα'
SELECT CAST([name] AS nvarchar(20)) AS [name], [v] FROM [dbo].[snap_greek] WHERE [name] >= CAST(@p1 COLLATE Greek_CI_AS AS varchar(20));

-- name: varchar_greek/bound_check
-- @p1 = nvarchar N'Δέλτα'
-- @p2 = nvarchar N'Λάμδα'
SELECT CAST(CAST(CAST(@p1 COLLATE Greek_CI_AS AS varchar(20)) AS nvarchar(20)) AS varbinary(40)) AS [b1], CAST(CAST(CAST(@p2 COLLATE Greek_CI_AS AS varchar(20)) AS nvarchar(20)) AS varbinary(40)) AS [b2];

-- name: nvarchar/middle
-- @p1 = nvarchar N'Ana'
-- @p2 = nvarchar N'Zoë'
SELECT [name], [v] FROM [dbo].[people] WHERE [name] >= CAST(@p1 AS nvarchar(50)) AND [name] < CAST(@p2 AS nvarchar(50));

-- name: uniqueidentifier/middle
-- @p1 = nvarchar N'6f9619ff-8b86-d011-b42d-00c04fc964ff'
-- @p2 = nvarchar N'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'
SELECT [id], [body] FROM [dbo].[docs] WHERE [id] >= CAST(@p1 AS uniqueidentifier) AND [id] < CAST(@p2 AS uniqueidentifier);

-- name: datetime2_7/middle
-- @p1 = datetime2(7) (civil.DateTime) 2024-03-01T12:00:00.123456700
-- @p2 = datetime2(7) (civil.DateTime) 2024-03-01T12:00:00.123456800
SELECT [at], CAST(CAST([what] AS nvarchar(100)) AS varbinary(200)) AS [what] FROM [dbo].[events] WHERE [at] >= CAST(@p1 AS datetime2(7)) AND [at] < CAST(@p2 AS datetime2(7));

-- name: guard/case_insensitive_equal
-- @p1 = nvarchar N'n'
-- @p2 = bigint 3
-- @p3 = bigint 5
SELECT CAST([name] AS nvarchar(10)) AS [name], [id] FROM [dbo].[snap_case] WHERE [name] = CAST(@p1 COLLATE Latin1_General_CI_AS AS varchar(10)) AND [id] >= CAST(@p2 AS int) AND [id] < CAST(@p3 AS int);

-- name: guard/accent_insensitive
-- @p1 = nvarchar N'e'
-- @p2 = bigint 3
-- @p3 = nvarchar N'é'
-- @p4 = bigint 5
SELECT CAST([name] AS nvarchar(10)) AS [name], [id] FROM [dbo].[snap_accent] WHERE [name] = CAST(@p1 COLLATE Latin1_General_CI_AI AS varchar(10)) AND [id] >= CAST(@p2 AS int) AND (([name] < CAST(@p3 COLLATE Latin1_General_CI_AI AS varchar(10))) OR ([name] = CAST(@p3 COLLATE Latin1_General_CI_AI AS varchar(10)) AND [id] < CAST(@p4 AS int)))
UNION ALL
SELECT CAST([name] AS nvarchar(10)) AS [name], [id] FROM [dbo].[snap_accent] WHERE [name] > CAST(@p1 COLLATE Latin1_General_CI_AI AS varchar(10)) AND [name] < CAST(@p3 COLLATE Latin1_General_CI_AI AS varchar(10))
UNION ALL
SELECT CAST([name] AS nvarchar(10)) AS [name], [id] FROM [dbo].[snap_accent] WHERE [name] = CAST(@p3 COLLATE Latin1_General_CI_AI AS varchar(10)) AND [id] < CAST(@p4 AS int) AND [name] > CAST(@p1 COLLATE Latin1_General_CI_AI AS varchar(10));

-- name: guard/three_groups
-- @p1 = nvarchar N'a'
-- @p2 = bigint 5
-- @p3 = nvarchar N'm'
-- @p4 = bigint 3
SELECT CAST([name] AS nvarchar(10)) AS [name], [id] FROM [dbo].[snap_case] WHERE [name] = CAST(@p1 COLLATE Latin1_General_CI_AS AS varchar(10)) AND [id] >= CAST(@p2 AS int) AND (([name] < CAST(@p3 COLLATE Latin1_General_CI_AS AS varchar(10))) OR ([name] = CAST(@p3 COLLATE Latin1_General_CI_AS AS varchar(10)) AND [id] < CAST(@p4 AS int)))
UNION ALL
SELECT CAST([name] AS nvarchar(10)) AS [name], [id] FROM [dbo].[snap_case] WHERE [name] > CAST(@p1 COLLATE Latin1_General_CI_AS AS varchar(10)) AND [name] < CAST(@p3 COLLATE Latin1_General_CI_AS AS varchar(10))
UNION ALL
SELECT CAST([name] AS nvarchar(10)) AS [name], [id] FROM [dbo].[snap_case] WHERE [name] = CAST(@p3 COLLATE Latin1_General_CI_AS AS varchar(10)) AND [id] < CAST(@p4 AS int) AND [name] > CAST(@p1 COLLATE Latin1_General_CI_AS AS varchar(10));

-- name: null/lower_null_leading
-- @p1 = bigint 5
-- @p2 = bigint 2
-- @p3 = bigint 1
SELECT [a], [b] FROM [dbo].[nk] WHERE [a] IS NULL AND [b] >= CAST(@p1 AS int) AND ((([a] IS NULL OR [a] < CAST(@p2 AS int))) OR ([a] = CAST(@p2 AS int) AND ([b] IS NULL OR [b] < CAST(@p3 AS int))))
UNION ALL
SELECT [a], [b] FROM [dbo].[nk] WHERE [a] IS NOT NULL AND ([a] IS NULL OR [a] < CAST(@p2 AS int))
UNION ALL
SELECT [a], [b] FROM [dbo].[nk] WHERE [a] = CAST(@p2 AS int) AND ([b] IS NULL OR [b] < CAST(@p3 AS int)) AND [a] IS NOT NULL;

-- name: null/both_null_trailing
-- @p1 = bigint 1
-- @p2 = bigint 2
SELECT [a], [b] FROM [dbo].[nk] WHERE [a] = CAST(@p1 AS int) AND ((([a] IS NULL OR [a] < CAST(@p2 AS int))))
UNION ALL
SELECT [a], [b] FROM [dbo].[nk] WHERE [a] > CAST(@p1 AS int) AND ([a] IS NULL OR [a] < CAST(@p2 AS int));

-- name: null/upper_null_leading
-- @p1 = bigint 7
SELECT [a], [b] FROM [dbo].[nk] WHERE [a] IS NULL AND ([b] IS NULL OR [b] < CAST(@p1 AS int));

-- name: null/lower_all_null
SELECT [a], [b] FROM [dbo].[nk] WHERE [a] IS NULL
UNION ALL
SELECT [a], [b] FROM [dbo].[nk] WHERE [a] IS NOT NULL;

-- name: weird_names/middle
-- @p1 = bigint 1
-- @p2 = nvarchar N'жж'
-- @p3 = bigint 2
-- @p4 = nvarchar N'аб'
SELECT [id ]]]]], [ключ], CAST(CAST([a b] AS nvarchar(max)) AS varbinary(max)) AS [a b] FROM [sales ]]x].[Ördersё 'q"] WHERE [id ]]]]] = CAST(@p1 AS int) AND [ключ] >= CAST(@p2 AS nchar(4)) AND (([id ]]]]] < CAST(@p3 AS int)) OR ([id ]]]]] = CAST(@p3 AS int) AND [ключ] < CAST(@p4 AS nchar(4))))
UNION ALL
SELECT [id ]]]]], [ключ], CAST(CAST([a b] AS nvarchar(max)) AS varbinary(max)) AS [a b] FROM [sales ]]x].[Ördersё 'q"] WHERE [id ]]]]] > CAST(@p1 AS int) AND [id ]]]]] < CAST(@p3 AS int)
UNION ALL
SELECT [id ]]]]], [ключ], CAST(CAST([a b] AS nvarchar(max)) AS varbinary(max)) AS [a b] FROM [sales ]]x].[Ördersё 'q"] WHERE [id ]]]]] = CAST(@p3 AS int) AND [ключ] < CAST(@p4 AS nchar(4)) AND [id ]]]]] > CAST(@p1 AS int);

-- name: dropped_and_identity/all
SELECT CAST([id] AS bigint) AS [id], CAST([v] AS varbinary(40)) AS [v], CAST(NULL AS varchar(10)) AS [gone], CAST(NULL AS xml) AS [doc], CAST(NULL AS binary(8)) AS [rv] FROM [dbo].[ddl];

-- name: dropped_and_identity/middle
-- @p1 = bigint 10
-- @p2 = bigint 20
SELECT CAST([id] AS bigint) AS [id], CAST([v] AS varbinary(40)) AS [v], CAST(NULL AS varchar(10)) AS [gone], CAST(NULL AS xml) AS [doc], CAST(NULL AS binary(8)) AS [rv] FROM [dbo].[ddl] WHERE [id] >= CAST(@p1 AS bigint) AND [id] < CAST(@p2 AS bigint);

-- name: hostile_names/middle
-- @p1 = bigint 1
-- @p2 = bigint 9
SELECT [k;1], CAST(CAST([v AS varchar] AS nvarchar(10)) AS varbinary(20)) AS [v AS varchar] FROM [dbo;x].[t]]; DROP TABLE t;--] WHERE [k;1] >= CAST(@p1 AS int) AND [k;1] < CAST(@p2 AS int);

-- name: empty/equal_bounds
-- @p1 = bigint 10000
SELECT [id], CAST([amount] * @p1 AS bigint) AS [amount], CAST([note] AS varbinary(max)) AS [note] FROM [dbo].[orders] WHERE 1 = 0;

-- name: object_guard/whole
-- @p1 = nvarchar N'[dbo].[lines]'
-- @p2 = bigint 245575913
SELECT [company], [id], [qty] FROM [dbo].[lines] WHERE OBJECT_ID(@p1) = @p2;

-- name: object_guard/middle
-- @p1 = nvarchar N'[dbo].[lines]'
-- @p2 = bigint 245575913
-- @p3 = bigint 3
-- @p4 = bigint 500
-- @p5 = bigint 7
-- @p6 = bigint 20
SELECT [company], [id], [qty] FROM [dbo].[lines] WHERE OBJECT_ID(@p1) = @p2 AND [company] = CAST(@p3 AS int) AND [id] >= CAST(@p4 AS bigint) AND (([company] < CAST(@p5 AS int)) OR ([company] = CAST(@p5 AS int) AND [id] < CAST(@p6 AS bigint)))
UNION ALL
SELECT [company], [id], [qty] FROM [dbo].[lines] WHERE OBJECT_ID(@p1) = @p2 AND [company] > CAST(@p3 AS int) AND [company] < CAST(@p5 AS int)
UNION ALL
SELECT [company], [id], [qty] FROM [dbo].[lines] WHERE OBJECT_ID(@p1) = @p2 AND [company] = CAST(@p5 AS int) AND [id] < CAST(@p6 AS bigint) AND [company] > CAST(@p3 AS int);

-- name: utf8/middle
-- @p1 = nvarchar N'Kraków'
-- @p2 = nvarchar N'Łódź'
SELECT CAST([name] AS nvarchar(40)) AS [name], CAST(CAST([notes] AS nvarchar(max)) AS varbinary(max)) AS [notes], CAST(CAST([legacy] AS nvarchar(max)) AS varbinary(max)) AS [legacy], CAST(CAST([code] AS nvarchar(3)) AS varbinary(6)) AS [code] FROM [dbo].[cities] WHERE [name] >= CAST(@p1 COLLATE Latin1_General_100_CI_AS_SC_UTF8 AS varchar(40)) AND [name] < CAST(@p2 COLLATE Latin1_General_100_CI_AS_SC_UTF8 AS varchar(40));

-- name: guard/turkish_i
-- @p1 = nvarchar N'I'
-- @p2 = bigint 5
-- @p3 = nvarchar N'i'
-- @p4 = bigint 3
SELECT CAST([name] AS nvarchar(10)) AS [name], [id] FROM [dbo].[tr] WHERE [name] = CAST(@p1 COLLATE Turkish_CI_AS AS varchar(10)) AND [id] >= CAST(@p2 AS int) AND (([name] < CAST(@p3 COLLATE Turkish_CI_AS AS varchar(10))) OR ([name] = CAST(@p3 COLLATE Turkish_CI_AS AS varchar(10)) AND [id] < CAST(@p4 AS int)))
UNION ALL
SELECT CAST([name] AS nvarchar(10)) AS [name], [id] FROM [dbo].[tr] WHERE [name] > CAST(@p1 COLLATE Turkish_CI_AS AS varchar(10)) AND [name] < CAST(@p3 COLLATE Turkish_CI_AS AS varchar(10))
UNION ALL
SELECT CAST([name] AS nvarchar(10)) AS [name], [id] FROM [dbo].[tr] WHERE [name] = CAST(@p3 COLLATE Turkish_CI_AS AS varchar(10)) AND [id] < CAST(@p4 AS int) AND [name] > CAST(@p1 COLLATE Turkish_CI_AS AS varchar(10));

